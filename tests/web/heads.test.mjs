// Head detection in headless Chromium against the native `gpt2 heads` on the committed small
// model (weights/gpt2-tiny-q8_0.gguf): the page asks the same lab call, so every cell's scores
// must be the CLI's. Also the CLI's own contract: the pinned output lines and exit status 2 for bad
// input.
import assert from 'node:assert/strict';
import {execFileSync, spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {kRoot, launchBrowser, serveSite, waitLoaded, watchConsole} from './browser.mjs';
import {closeTo, kNative, modelDir} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 120_000;
const kGpt2 = path.join(kNative, 'gpt2');
const kSmall = path.join(kRoot, 'weights/gpt2-tiny-q8_0.gguf');
const kText = 'The Python interpreter is easily extended with new functions and data types implemented in C';

// `gpt2 heads --json` (full precision) and its printed lines, which must say the same.
function nativeHeads(extra = []) {
  const json = path.join(modelDir('heads'), `heads-${extra.length}.json`);
  const out = execFileSync(kGpt2, ['heads', '--model', kSmall, '--threads', '1', '--json', json, ...extra],
                           {encoding: 'utf8'});
  const lines = out.trimEnd().split('\n').map((l) => l.split('\t'));
  const parsed = JSON.parse(fs.readFileSync(json, 'utf8'));
  assert.equal(lines.length, parsed.heads.length);
  lines.forEach(([name, prev, dup, induction], i) => {
    const h = parsed.heads[i];
    assert.equal(name, `${h.layer}.${h.head}`);
    closeTo(Number(prev), h.prev, 1e-6, `${name} prev line`);
    closeTo(Number(dup), h.dup, 1e-6, `${name} dup line`);
    closeTo(Number(induction), h.induction, 1e-6, `${name} induction line`);
  });
  return parsed;
}

async function scoreHeads(page, source) {
  await page.getByTestId('heads-source').selectOption(source);
  await page.evaluate(() => { window.gpt2Page.state.heads = {running: false}; });
  await page.getByTestId('heads-run').click();
  await page.waitForFunction(() => window.gpt2Page.state.heads.result || !document.querySelector('[data-testid=error]').hidden,
                             null, {timeout: kTimeout});
  const err = page.getByTestId('error');
  if (await err.isVisible()) throw new Error(`page error: ${await err.textContent()}`);
  await page.waitForSelector('[data-testid=heads-grid]', {timeout: kTimeout});
  return page.locator('[data-testid=heads-grid] .head-cell').evaluateAll((cells) => cells.map((c) => ({
    testid: c.dataset.testid, layer: Number(c.dataset.layer), head: Number(c.dataset.head), prev: Number(c.dataset.prev),
    dup: Number(c.dataset.dup), induction: Number(c.dataset.induction), kind: c.dataset.kind})));
}

// The page's wasm kernels sum in another order than the native ones (SIMD128 against AVX2/AVX-512):
// the same scores to within 1e-4, the golden tests' tolerance against PyTorch.
const kPageTolerance = 1e-4;

function sameScores(cells, native) {
  assert.equal(cells.length, native.heads.length);
  cells.forEach((c, i) => {
    const h = native.heads[i];
    assert.equal(c.testid, `heads-cell-${h.layer}-${h.head}`);
    for (const k of ['prev', 'dup', 'induction']) closeTo(c[k], h[k], kPageTolerance, `${h.layer}.${h.head} ${k}`);
  });
}

describe('gpt2 heads on the command line', {skip: !fs.existsSync(kGpt2) && 'build/native not built'}, () => {
  test('bad flags and ids exit 2 with a message', () => {
    for (const [args, message] of [
      [['--ids', '1,x'], /--ids: 'x' is not a token id/],
      [['--ids', '50257'], /token id 50257 is not in the vocabulary \(0\.\.50256\)/],
      [['--ids', Array.from({length: 512}, (_, i) => i + 1).join(',')], /give at most 511 ids/],
      [['--bogus', '1'], /unknown argument '--bogus'/],
    ]) {
      const r = spawnSync(kGpt2, ['heads', '--model', kSmall, ...args], {encoding: 'utf8'});
      assert.equal(r.status, 2, `${args[0]}: exit status`);
      assert.match(r.stderr, message);
    }
    const r = spawnSync(kGpt2, ['heads'], {encoding: 'utf8'});
    assert.equal(r.status, 2);
    assert.match(r.stderr, /heads needs --model/);
  });
});

describe('the heads grid', {skip: (!fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built') ||
                                  (!fs.existsSync(kGpt2) && 'build/native not built')}, () => {
  let server, browser, page;
  const consoleLines = [];

  before(async () => {
    const dir = modelDir('heads');
    fs.mkdirSync(dir, {recursive: true});
    fs.copyFileSync(kSmall, path.join(dir, 'small.gguf'));
    server = await serveSite({site: kSite, models: dir});
    browser = await launchBrowser();
    page = await browser.context.newPage();
    consoleLines.push(...watchConsole(page));
    await page.goto(server.url + '?model=models/small.gguf&debug=1');
    await waitLoaded(page, kTimeout);
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  test('random ids: every cell equals `gpt2 heads`; 0.0 is the previous-token head', async () => {
    const native = nativeHeads();
    const cells = await scoreHeads(page, 'random');
    sameScores(cells, native);
    assert.equal(cells.find((c) => c.layer === 0 && c.head === 0).kind, 'prev');
    // The page's text is now the sequence the heads saw: <|endoftext|> and the ids twice.
    const ids = await page.evaluate(() => window.gpt2Page.state.ids);
    assert.deepEqual(ids, native.sequence);
  });

  test('the prompt\'s tokens: equal to `gpt2 heads --ids`; 2.0 is an induction head; a click opens it', async () => {
    await page.getByTestId('prompt').fill(kText);
    const cells = await scoreHeads(page, 'prompt');
    const ids = await page.evaluate(() => window.gpt2Page.state.heads.result.ids);
    const native = nativeHeads(['--ids', ids.join(',')]);
    assert.deepEqual(native.ids, ids);
    sameScores(cells, native);
    const kinds = Object.fromEntries(cells.map((c) => [`${c.layer}.${c.head}`, c.kind]));
    assert.equal(kinds['0.0'], 'prev');
    assert.equal(kinds['2.0'], 'induction');
    await page.getByTestId('heads-cell-2-0').click();
    await page.waitForFunction(() => {
      const m = window.gpt2Page.state.attentionMap;
      return m && m.layer === 2 && m.head === 0 && m.positions === window.gpt2Page.state.ids.length;
    }, null, {timeout: kTimeout});
    assert.equal(await page.getByTestId('heads-cell-2-0').getAttribute('aria-pressed'), 'true');
    // The map is the head's attention on the sequence: its induction score again, from the rows.
    const fromMap = await page.evaluate(() => {
      const {map, positions: P} = window.gpt2Page.state.attentionMap;
      const R = (P - 1) / 2;
      let s = 0;
      for (let p = R + 1; p <= 2 * R; ++p) s += map[p * P + p - R + 1];
      return s / R;
    });
    closeTo(fromMap, native.heads[2 * native.n_head].induction, kPageTolerance, 'induction from the attention map');
  });
});
