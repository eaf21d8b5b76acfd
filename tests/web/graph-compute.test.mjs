// Attribution graphs computed in headless Chromium against the native CLI built from the same
// sources. The transcoders are scripts/make_golden.py's random ones of the tiny test model, in
// the public set's layout (tests/data/transcoders: gpt2-small-dun-chl-mlp-tc{0,1}/sae.json and
// sae.safetensors), served by a fake Hugging Face (fake-hf.mjs) as jacobdunefsky/gpt2small-
// transcoders; the page converts each block to Q8_0 in its worker, as `gpt2-convert --transcoders
// DIR --type q8_0` does for the CLI. Checked: the computed graph equals `gpt2 graph --json` at the
// page's thresholds; a feature's card agrees with the graph's activation; the check's two numbers
// equal `gpt2 graph --check`, for one feature and for a group of them (a supernode); a second
// visit reads every block from the cache with no request; a cancelled graph stops and the next one
// computes; a folder URL with no block, and transcoders of another width, fail clearly, keeping
// what was loaded.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {kRoot, launchBrowser, serveSite, watchConsole} from './browser.mjs';
import {kTranscoderRepoPath, startFakeHf} from './fake-hf.mjs';
import {closeTo, kNative, makeModels, modelDir} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 90_000;
const kData = path.join(kRoot, 'tests/data/transcoders');
const kPrompt = 'The quick brown fox';
// Native and WASM sum the int8 products in different orders (as graph-embind.test.mjs).
const kTolerance = 2e-3;
const skip = (!fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built') ||
             (!fs.existsSync(path.join(kNative, 'gpt2-convert')) && 'build/native not built') ||
             (!fs.existsSync(kData) && 'tests/data/transcoders missing');

const tool = (name, args) => execFileSync(path.join(kNative, name), args, {encoding: 'utf8'});

function assertSameGraph(page, native, what) {
  const a = JSON.parse(page), b = JSON.parse(native);
  assert.deepEqual(a.metadata.prompt_tokens, b.metadata.prompt_tokens, what);
  const ids = (g) => g.nodes.map((n) => n.node_id);
  assert.deepEqual(ids(a), ids(b), `${what}: the same nodes in the same order`);
  b.nodes.forEach((n, i) => {
    for (const k of ['activation', 'influence']) {
      if (n[k] === null) assert.equal(a.nodes[i][k], null);
      else closeTo(a.nodes[i][k], n[k], kTolerance, `${what} node ${n.node_id} ${k}`);
    }
  });
  const links = (g) => g.links.map((l) => `${l.source}>${l.target}`);
  assert.deepEqual(links(a), links(b), `${what}: the same links`);
  b.links.forEach((l, k) => closeTo(a.links[k].weight, l.weight, kTolerance, `${what} link ${k}`));
}

async function pageError(page) {
  const err = page.getByTestId('graph-error');
  return (await err.isVisible()) ? err.textContent() : '';
}

// Waits until the transcoder load the page started has ended and the page shows it: its status
// names the blocks held, and an error shows if it failed.
async function waitTranscoders(page) {
  await page.waitForFunction(() => {
    const s = window.gpt2Page.state;
    const $ = (id) => document.querySelector(`[data-testid=${id}]`);
    return !s.graphTranscodersLoading && $('graph-transcoders-status').textContent === s.graphTranscodersStatus &&
           $('graph-error').hidden === !s.graphError;
  }, null, {timeout: kTimeout});
  return page.getByTestId('graph-transcoders-status').textContent();
}

async function openPage(browser, site, query, consoleLines) {
  const page = await browser.context.newPage();
  consoleLines.push(...watchConsole(page));
  await page.goto(`${site.url}?debug=1&model=models/tiny-q8_0.gguf${query}`);
  await page.waitForFunction(() => document.querySelector('[data-testid=progress]').dataset.source ||
                                   !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
  return page;
}

describe('attribution graphs computed in the page', {skip}, () => {
  let models, dir, site, tcGguf, nativeJson, files;
  const consoleLines = [];

  before(async () => {
    models = makeModels('graph-page');
    dir = modelDir('graph-page');
    tcGguf = path.join(dir, 'transcoders-q8_0.gguf');
    tool('gpt2-convert', ['--transcoders', kData, '--output', tcGguf, '--type', 'q8_0', '--quiet']);
    files = {};
    for (const l of [0, 1]) {
      for (const f of ['sae.json', 'sae.safetensors']) {
        files[`gpt2-small-dun-chl-mlp-tc${l}/${f}`] = fs.readFileSync(path.join(kData, `gpt2-small-dun-chl-mlp-tc${l}`, f));
      }
    }
    // A folder whose block 1 reads a stream of another width (its sae.json says so).
    const wide = path.join(dir, 'tc-wide', 'gpt2-small-dun-chl-mlp-tc1');
    fs.mkdirSync(wide, {recursive: true});
    fs.writeFileSync(path.join(wide, 'sae.json'), JSON.stringify({d_in: 768, d_out: 768, d_sae: 48}));
    fs.writeFileSync(path.join(wide, 'sae.safetensors'), files['gpt2-small-dun-chl-mlp-tc1/sae.safetensors']);
    fs.mkdirSync(path.join(dir, 'tc-empty'), {recursive: true});
    const out = path.join(dir, 'graph.json');
    // The page asks its engine for the graph pruned at node 0.99 and edge 0.98, at most 1,000 feature nodes.
    tool('gpt2', ['graph', '--model', models.model, '--transcoders', tcGguf, '--prompt', kPrompt, '--threads', '1',
                  '--node-threshold', '0.99', '--edge-threshold', '0.98', '--max-feature-nodes', '1000', '--json', out]);
    nativeJson = fs.readFileSync(out, 'utf8');
    site = await serveSite({site: kSite, models: dir});
  });

  after(async () => {
    await site?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  test('from Hugging Face: the graph equals gpt2 graph --json, a card and a check agree with the CLI; the cache serves a second visit', async () => {
    const hf = await startFakeHf({transcoders: files});
    const browser = await launchBrowser();
    try {
      const page = await openPage(browser, site, `&hf=${encodeURIComponent(hf.origin)}`, consoleLines);
      assert.equal(await page.getByTestId('graph-compute').isDisabled(), true, 'no transcoders yet');
      await page.getByTestId('graph-transcoders-hf').click();
      const status = await waitTranscoders(page);
      assert.equal(await pageError(page), '');
      assert.match(status, /all 2 blocks loaded/);
      for (const l of [0, 1]) {
        assert.ok(hf.requests.includes(`GET ${kTranscoderRepoPath}/gpt2-small-dun-chl-mlp-tc${l}/sae.json`), hf.requests.join('\n'));
        assert.ok(hf.requests.some((q) => new RegExp(`^GET /cdn/[0-9a-f]{64}/gpt2-small-dun-chl-mlp-tc${l}/sae\\.safetensors`).test(q)),
                  hf.requests.join('\n'));
      }

      await page.getByTestId('graph-prompt').fill(kPrompt);
      await page.getByTestId('graph-compute').click();
      // Computed and drawn (the store draws at the next frame), or an error shown.
      await page.waitForFunction(() => (window.gpt2Page.state.graphComputed &&
                                        document.querySelector('[data-testid=graph-under]').textContent !== '') ||
                                       !document.querySelector('[data-testid=graph-error]').hidden, null, {timeout: kTimeout});
      assert.equal(await pageError(page), '');
      assertSameGraph(await page.evaluate(() => window.gpt2Page.state.graph.text), nativeJson, 'the computed graph');
      assert.match(await page.getByTestId('graph-under').textContent(), /plain model/);
      // The page's export is the engine's file.
      assert.equal(await page.getByTestId('graph-export').isDisabled(), false);

      // A feature node: its card, then the check of it against the CLI's.
      const graph = JSON.parse(nativeJson);
      // The most influential feature, shown once the node slider is up to the engine's 0.99 (the
      // tiny model's influence sits mostly in its error nodes).
      const node = graph.nodes.filter((n) => n.feature_type === 'cross layer transcoder')
          .sort((x, y) => x.influence - y.influence)[0];
      await page.getByTestId('graph-node-threshold').fill('0.99');
      await page.locator(`[data-testid=graph-view] [data-node-id="${node.node_id}"]`).first().click();
      await page.waitForSelector('[data-testid=graph-card-strip]', {timeout: kTimeout});
      const strip = await page.locator('[data-testid=graph-card-strip] .chip').evaluateAll(
          (cs) => cs.map((c) => Number(c.dataset.value)));
      assert.equal(strip.length, graph.metadata.prompt_tokens.length);
      closeTo(strip[node.ctx_idx], node.activation, kTolerance, `${node.node_id}'s activation on its card`);
      // Its label from a Neuronpedia export of its block (JSON lines, as Neuronpedia publishes them).
      const labels = path.join(dir, `labels-${node.layer}.jsonl`);
      fs.writeFileSync(labels, [{index: String(node.feature), description: 'capital cities'}, {index: 0, description: 'x'}]
          .map((r) => JSON.stringify(r)).join('\n'));
      await page.getByTestId('graph-labels-block').fill(String(node.layer));
      await page.getByTestId('graph-labels-file').setInputFiles(labels);
      await page.waitForFunction(() => /capital cities/.test(document.querySelector('[data-testid=graph-feature-card]').textContent),
                                 null, {timeout: kTimeout});
      await page.getByTestId('graph-check').click();
      await page.waitForSelector('[data-testid=graph-check-row]', {timeout: kTimeout});
      const row = await page.getByTestId('graph-check-row').first();
      const m = /predicted change (\S+), exact change (\S+)/.exec(tool('gpt2', [
        'graph', '--model', models.model, '--transcoders', tcGguf, '--prompt', kPrompt, '--threads', '1',
        '--max-feature-nodes', '1000', '--check', node.node_id]));
      closeTo(Number(await row.getAttribute('data-predicted')), Number(m[1]), kTolerance, 'predicted change');
      closeTo(Number(await row.getAttribute('data-exact')), Number(m[2]), kTolerance, 'exact change');

      // Pinning the feature set the QK form to its block and position.
      assert.equal(await page.getByTestId('graph-qk-layer').inputValue(), String(node.layer));
      assert.equal(await page.getByTestId('graph-qk-query').inputValue(), String(node.ctx_idx));
      // QK attribution of head 1.2 from the last position to position 1: each side's rows add up to the score.
      await page.getByTestId('graph-qk-layer').fill('1');
      await page.getByTestId('graph-qk-query').fill('');
      await page.getByTestId('graph-qk-head').fill('2');
      await page.getByTestId('graph-qk-key').fill('1');
      await page.getByTestId('graph-qk').click();
      await page.waitForSelector('[data-testid=graph-qk-title]', {timeout: kTimeout});
      const score = Number(await page.getByTestId('graph-qk-title').getAttribute('data-score'));
      for (const side of ['query', 'key']) {
        const parts = await page.locator(`[data-testid=graph-qk-${side}-part]`).evaluateAll(
            (rs) => rs.map((r) => ({kind: r.dataset.kind, score: Number(r.dataset.score)})));
        assert.ok(parts.some((p) => p.kind === 'rest') && parts.length > 2, `${side} side rows`);
        const total = parts.reduce((a, p) => a + p.score, 0);
        assert.ok(Math.abs(total - score) <= 2e-2 * Math.max(1, Math.abs(score)), `${side} side: ${total} against ${score}`);
      }
      assert.ok(await page.getByTestId('graph-qk-pair').count() > 0);

      // A group (a supernode) of the three most influential features, drawn as one node: pinned,
      // Check sets its features at once, as the CLI's check of the same nodes together.
      const members = graph.nodes.filter((n) => n.feature_type === 'cross layer transcoder' && n.influence <= 0.99)
          .sort((x, y) => x.influence - y.influence).slice(0, 3).map((n) => n.node_id);
      assert.equal(members.length, 3);
      for (const id of members) {
        const mark = page.locator(`[data-testid=graph-view] [data-node-id="${id}"]`);
        if (await mark.getAttribute('aria-pressed') !== 'true') await mark.click();
        await page.getByTestId('graph-group-add').click();
      }
      await page.getByTestId('graph-group-name').fill('top three');
      await page.getByTestId('graph-group-make').click();
      const group = page.locator('[data-testid=graph-supernode]');
      await group.waitFor();
      assert.deepEqual((await group.getAttribute('data-members')).split(' ').sort(), [...members].sort());
      // The pinned member became the pinned group.
      assert.equal(await group.getAttribute('aria-pressed'), 'true');
      assert.match(await page.getByTestId('graph-check-nodes').textContent(), /group “top three” is checked, its 3 feature nodes/);
      await page.getByTestId('graph-check').click();
      await page.waitForFunction(() => document.querySelectorAll('[data-testid=graph-check-row]').length === 2, null,
                                 {timeout: kTimeout});
      const groupRow = page.getByTestId('graph-check-row').first();
      assert.equal(await groupRow.getAttribute('data-group'), 'top three');
      const g = /predicted change (\S+), exact change (\S+)/.exec(tool('gpt2', [
        'graph', '--model', models.model, '--transcoders', tcGguf, '--prompt', kPrompt, '--threads', '1',
        '--max-feature-nodes', '1000', '--check', members.join(',')]));
      closeTo(Number(await groupRow.getAttribute('data-predicted')), Number(g[1]), kTolerance, 'the group\'s predicted change');
      closeTo(Number(await groupRow.getAttribute('data-exact')), Number(g[2]), kTolerance, 'the group\'s exact change');
      // Newest first: the one feature's check is the row below, and differs.
      const single = page.getByTestId('graph-check-row').nth(1);
      assert.equal(await single.getAttribute('data-group'), '');
      assert.notEqual(Number(await groupRow.getAttribute('data-exact')), Number(await single.getAttribute('data-exact')),
                      'the group\'s check is not its first member\'s');

      // Second visit: every block from the cache, no request.
      const before = hf.requests.length;
      const again = await openPage(browser, site, `&hf=${encodeURIComponent(hf.origin)}`, consoleLines);
      await again.getByTestId('graph-transcoders-hf').click();
      assert.match(await waitTranscoders(again), /all 2 blocks loaded/);
      assert.equal(hf.requests.length, before, hf.requests.slice(before).join('\n'));
    } finally {
      await browser.close();
      await hf.close();
    }
  });

  test('cancel stops a graph; a folder with no block, and a block of another width, fail clearly; what was loaded stays', async () => {
    const browser = await launchBrowser();
    try {
      const page = await openPage(browser, site, '', consoleLines);
      await page.getByTestId('graph-transcoders-url').fill('models/tc-empty');
      await page.getByTestId('graph-transcoders-load-url').click();
      await waitTranscoders(page);
      assert.match(await pageError(page), /has no transcoder block/);
      // Block 0 from a local .gguf holding both blocks, then a folder whose block 1 is too wide.
      await page.getByTestId('graph-transcoders-file').setInputFiles(tcGguf);
      assert.match(await waitTranscoders(page), /all 2 blocks loaded/);
      // Cancel right after Compute (both in one task, so the worker has them in order before its
      // first step ends): the job stops, says so, and the engine computes the next one.
      await page.getByTestId('graph-prompt').fill('The quick brown fox');
      await page.evaluate(() => {
        document.querySelector('[data-testid=graph-compute]').click();
        document.querySelector('[data-testid=graph-cancel]').click();
      });
      await page.waitForFunction(() => !window.gpt2Page.state.graphComputing &&
                                       !document.querySelector('[data-testid=graph-error]').hidden, null, {timeout: kTimeout});
      assert.match(await pageError(page), /Cancelled after \d+ of \d+/);
      assert.equal(await page.evaluate(() => window.gpt2Page.state.graph), null, 'no graph was shown');
      await page.getByTestId('graph-compute').click();
      await page.waitForFunction(() => window.gpt2Page.state.graphComputed, null, {timeout: kTimeout});
      await page.getByTestId('graph-transcoders-url').fill('models/tc-wide');
      await page.getByTestId('graph-transcoders-load-url').click();
      const status = await waitTranscoders(page);
      assert.match(await pageError(page), /width 768.*width \d+/, `status: ${status}`);
      assert.match(status, /all 2 blocks loaded/, 'the set loaded before stays');
    } finally {
      await browser.close();
    }
  });
});
