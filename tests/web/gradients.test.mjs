// Saliency on the page in headless Chromium against the native CLI's `gpt2 saliency` on the same
// model: the page forwards to the engine's lab, so its numbers must be the CLI's.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {generateIds, kRoot, openSite} from './browser.mjs';
import {closeTo, kNative, kPrompt, kSampling, makeModels, modelDir, nativeInspect, nodeEngine} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 60_000;
const kGpt2 = path.join(kNative, 'gpt2');

describe('saliency on the page', {skip: !fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built'}, () => {
  let models, server, browser, page, T;
  let consoleLines = [];

  before(async () => {
    models = makeModels('gradients');
    T = nativeInspect(models.model).ids.length;
    ({server, browser, page, consoleLines} = await openSite({site: kSite, models: modelDir('gradients'), timeout: kTimeout}));
    await generateIds(page, kPrompt, kSampling, kTimeout);
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  for (const [method, steps] of [['grad', 16], ['ig', 8]]) {
    test(`the tokens' colours hold gpt2 saliency --method ${method}'s values`, async () => {
      await page.evaluate(() => window.gpt2Page.set({saliency: null}));
      await page.getByTestId('saliency-method').selectOption(method);
      await page.getByTestId('saliency-steps').fill(String(steps));
      await page.waitForFunction(() => !document.querySelector('[data-testid=saliency-run]').disabled, null,
                                 {timeout: kTimeout});
      await page.getByTestId('saliency-run').click();
      await page.waitForFunction(() => window.gpt2Page.state.saliency ||
                                       !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
      const err = page.getByTestId('error');
      if (await err.isVisible()) throw new Error(`page error: ${await err.textContent()}`);
      const s = await page.evaluate(() => {
        const x = window.gpt2Page.state.saliency;
        return {values: Array.from(x.values), total: x.total, delta: x.delta, position: x.position, target: x.target};
      });
      assert.equal(s.position, T - 1);  // the picked token: the prompt's last
      const out = execFileSync(kGpt2, ['saliency', '--model', models.model, '--prompt', kPrompt, '--threads', '1',
                                       '--activations', 'int8', '--target', String(s.target), '--method', method,
                                       '--steps', String(steps)], {encoding: 'utf8'});
      const lines = out.trimEnd().split('\n').map((l) => l.split('\t'));
      assert.equal(lines.length, T + 2);
      const scale = Math.max(1e-6, ...lines.slice(0, T).map((l) => Math.abs(Number(l[1]))));
      // The page's conversation holds the generated tokens too; attention is causal, so the
      // prompt's values are the CLI's and the later tokens' are zero.
      for (let p = 0; p < s.values.length; ++p) {
        const want = p < T ? Number(lines[p][1]) : 0;
        closeTo(s.values[p] / scale, want / scale, 2e-3, `value ${p}`);
      }
      closeTo(s.total / scale, Number(lines[T][1]) / scale, 2e-3, 'total');
      closeTo(s.delta, Number(lines[T + 1][1]), 2e-3, 'delta');
      await page.waitForFunction((n) => document.querySelectorAll('[data-testid=saliency] .chip').length === n,
                                 s.values.length, {timeout: kTimeout});
      const chips = page.locator('[data-testid=saliency] .chip');
      const first = await chips.nth(0).getAttribute('aria-label');
      assert.match(first, /position 0: [+-]/);
      await chips.nth(T - 1).focus();
      assert.match(await page.locator('#saliency-readout').textContent(), new RegExp(`position ${T - 1}`));
      assert.match(await page.getByTestId('saliency-summary').textContent(), /total/);
    });
  }

  test('the export holds the saliency computed last (npy and JSON)', async () => {
    const s = await page.evaluate(() => {
      const x = window.gpt2Page.state.saliency;
      return {values: Array.from(x.values), method: x.method, steps: x.steps, position: x.position, target: x.target,
              total: x.total};
    });
    const name = s.method === 'ig' ? `saliency.integrated_gradients_${s.steps}` : 'saliency.grad_x_input';
    await page.getByTestId('export-tensor').selectOption('saliency');
    const [npyDownload] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-npy').click()]);
    assert.equal(npyDownload.suggestedFilename(), `${name}.npy`);
    const bytes = fs.readFileSync(await npyDownload.path());
    const headerLength = bytes.readUInt16LE(8);
    const header = bytes.subarray(10, 10 + headerLength).toString('latin1');
    assert.match(header, new RegExp(`'shape': \\(1, ${s.values.length}\\)`));
    assert.equal(bytes.length, 10 + headerLength + 4 * s.values.length);
    s.values.forEach((v, p) => assert.equal(bytes.readFloatLE(10 + headerLength + 4 * p), Math.fround(v), `npy ${p}`));
    const [jsonDownload] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-json').click()]);
    const parsed = JSON.parse(fs.readFileSync(await jsonDownload.path(), 'utf8'));
    assert.equal(parsed.name, name);
    assert.deepEqual(parsed.shape, [1, s.values.length]);
    assert.deepEqual(parsed.data, s.values);
    assert.deepEqual([parsed.position, parsed.target, parsed.method, parsed.total], [s.position, s.target, s.method, s.total]);
    await page.getByTestId('export-tensor').selectOption('hook_resid_pre');
  });

  test('why a head attends here: the chips hold the Node binding\'s gradient x input of that score', async () => {
    const [layer, head, key] = [1, 2, 2];
    await page.locator(`#attention-grid [data-layer="${layer}"][data-head="${head}"]`).click();
    await page.waitForFunction(([l, h]) => window.gpt2Page.state.attentionMap?.layer === l &&
                                           window.gpt2Page.state.attentionMap?.head === h, [layer, head], {timeout: kTimeout});
    const query = await page.evaluate(() => window.gpt2Page.state.picked);
    assert.ok(query >= key, `picked ${query}`);
    // The head's map by keyboard: its cursor starts at (picked row, key 0); Enter picks the cell.
    await page.locator('#attention-big').focus();
    for (let i = 0; i < key; ++i) await page.keyboard.press('ArrowRight');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => !document.querySelector('[data-testid=attn-why-run]').disabled, null, {timeout: kTimeout});
    assert.match(await page.locator('#attn-why-pair').textContent(), new RegExp(`query position ${query}, key position ${key}`));
    await page.getByTestId('attn-why-run').click();
    await page.waitForFunction(() => window.gpt2Page.state.why || !document.querySelector('[data-testid=error]').hidden,
                               null, {timeout: kTimeout});
    const err = page.getByTestId('error');
    if (await err.isVisible()) throw new Error(`page error: ${await err.textContent()}`);
    const w = await page.evaluate(() => {
      const x = window.gpt2Page.state.why;
      return {values: Array.from(x.values), score: x.score, total: x.total, layer: x.layer, head: x.head, query: x.query,
              key: x.key, ids: Array.from(window.gpt2Page.state.ids)};
    });
    assert.deepEqual([w.layer, w.head, w.query, w.key], [layer, head, query, key]);
    // The same call through the bindings under Node, on the page's conversation.
    const {engine} = await nodeEngine(models.model);
    engine.prefill(w.ids);
    const want = engine.scoreSaliency(layer, head, query, key);
    engine.delete();
    assert.equal(w.values.length, want.values.length);
    const scale = Math.max(1e-6, ...Array.from(want.values, Math.abs));
    w.values.forEach((v, p) => closeTo(v / scale, want.values[p] / scale, 1e-4, `value ${p}`));
    for (let p = query + 1; p < w.values.length; ++p) assert.equal(w.values[p], 0);
    closeTo(w.score, want.score, 1e-4, 'score');
    await page.waitForFunction((n) => document.querySelectorAll('[data-testid=attn-why] .chip').length === n,
                               w.values.length, {timeout: kTimeout});
    const chips = page.locator('[data-testid=attn-why] .chip');
    assert.match(await chips.nth(0).getAttribute('aria-label'), /position 0: [+-]/);
    assert.match(await chips.nth(1).getAttribute('title'), /position 1: [+-]/);
    await chips.nth(key).focus();
    assert.match(await page.locator('#attn-why-readout').textContent(), new RegExp(`position ${key}`));
    assert.match(await page.getByTestId('attn-why-summary').textContent(), /attention score, the scaled q·k before the softmax/);
  });

  async function runAtp() {
    await page.evaluate(() => window.gpt2Page.set({atp: null}));
    await page.waitForFunction(() => !document.querySelector('[data-testid=atp-run]').disabled, null, {timeout: kTimeout});
    await page.getByTestId('atp-run').click();
    await page.waitForFunction(() => window.gpt2Page.state.atp || !document.querySelector('[data-testid=error]').hidden,
                               null, {timeout: kTimeout});
    const err = page.getByTestId('error');
    if (await err.isVisible()) throw new Error(`page error: ${await err.textContent()}`);
    return page.evaluate(() => {
      const x = window.gpt2Page.state.atp;
      return {heads: Array.from(x.heads), residPre: Array.from(x.residPre), target: x.target, contrast: x.contrast,
              metric: x.metric, metricCorrupt: x.metricCorrupt, nLayer: x.nLayer, nHead: x.nHead, T: x.tokens};
    });
  }

  test('attribution patching beside exact patching holds gpt2 atp\'s estimates and their correlation', async () => {
    // A corrupted prompt of the same length whose answer differs (found with the CLI), as the
    // exact patching needs.
    const plain = nativeInspect(models.model);
    const clean = kPrompt;
    const corrupted = ['The quick brown cat jumps over', 'The slow brown fox jumps over', 'A quick brown fox jumps over',
                       'The quick red fox jumps over', 'The quick brown dog jumps over'].find((c) => {
      const x = nativeInspect(models.model, c);
      return x.ids.length === T && x.final[T - 1].top_ids[0] !== plain.final[T - 1].top_ids[0];
    });
    assert.ok(corrupted, 'a corrupted prompt with another answer');
    await page.getByTestId('patch-clean').fill(clean);
    await page.getByTestId('patch-corrupted').fill(corrupted);
    const check = (a, target, contrast) => {
      // The page differentiates the corrupted run, patched from the clean one (as its exact map).
      const args = ['atp', '--model', models.model, '--clean', corrupted, '--corrupt', clean, '--threads', '1',
                    '--activations', 'int8'];
      if (target >= 0) args.push('--target', String(target), '--contrast', String(contrast));
      const lines = execFileSync(kGpt2, args, {encoding: 'utf8'}).trimEnd().split('\n').map((l) => l.split('\t'));
      const values = [...a.heads, ...a.residPre];
      assert.equal(lines.length, values.length + 2);
      const scale = Math.max(1e-6, ...values.map(Math.abs));
      values.forEach((v, i) => closeTo(v / scale, Number(lines[i][1]) / scale, 2e-3, lines[i][0]));
      closeTo(a.metric, Number(lines[values.length][1]), 2e-3, 'metric');
      closeTo(a.metricCorrupt, Number(lines[values.length + 1][1]), 2e-3, 'metric_corrupt');
    };
    const first = await runAtp();
    check(first, -1, -1);
    await page.getByTestId('patch-run').click();
    await page.waitForFunction(() => {
      const p = window.gpt2Page.state.patching;
      return (!p.running && p.result && p.result.done === p.result.total) ||
             !document.querySelector('[data-testid=error]').hidden;
    }, null, {timeout: 5 * kTimeout});
    assert.equal(await page.getByTestId('error').isVisible(), false, await page.getByTestId('error').textContent());
    const exact = await page.evaluate(() => ({answer: window.gpt2Page.state.patching.result.answer,
                                               other: window.gpt2Page.state.patching.result.other}));
    const second = await runAtp();
    assert.equal(second.target, exact.answer);
    assert.equal(second.contrast, exact.other);
    check(second, exact.answer, exact.other);
    await page.waitForFunction(() => document.querySelector('[data-testid=atp]').dataset.correlation !== undefined,
                               null, {timeout: kTimeout});
    const r = Number(await page.getByTestId('atp').getAttribute('data-correlation'));
    assert.ok(Number.isFinite(r) && r >= -1 && r <= 1, `correlation ${r}`);
    assert.match(await page.getByTestId('atp-status').textContent(), /Correlation with the exact patching/);
  });

  // Runs the cell (row, col) of a heat map by keyboard (Enter on its cursor, which the arrow keys
  // move and clamp at the edges) and returns the 'atp-exact' reply stored for `key`.
  async function clickExact(canvas, row, col, key) {
    await page.locator(canvas).focus();
    for (let i = 0; i < 8; ++i) await page.keyboard.press('ArrowUp');
    for (let i = 0; i < 16; ++i) await page.keyboard.press('ArrowLeft');
    for (let i = 0; i < row; ++i) await page.keyboard.press('ArrowDown');
    for (let i = 0; i < col; ++i) await page.keyboard.press('ArrowRight');
    await page.keyboard.press('Enter');
    await page.waitForFunction((k) => window.gpt2Page.state.atpExact?.results[k] ||
                                      !document.querySelector('[data-testid=error]').hidden, key, {timeout: kTimeout});
    const err = page.getByTestId('error');
    if (await err.isVisible()) throw new Error(`page error: ${await err.textContent()}`);
    // The reply is in the state; the view draws it on the next frame.
    await page.waitForFunction((k) => document.querySelector('[data-testid=atp-exact]').dataset.exact ===
                                      String(window.gpt2Page.state.atpExact.results[k].value), key, {timeout: kTimeout});
    return page.evaluate((k) => window.gpt2Page.state.atpExact.results[k], key);
  }

  test('a clicked cell of either attribution map runs that patch exactly', async () => {
    const s = await page.evaluate(() => {
      const x = window.gpt2Page.state;
      return {atp: {target: x.atp.target, contrast: x.atp.contrast, heads: Array.from(x.atp.heads), tokens: x.atp.tokens,
                    nHead: x.atp.nHead, residPre: Array.from(x.atp.residPre)},
              request: x.atpRequest, patching: {recovered: Array.from(x.patching.result.recovered),
                                                cleanDiff: x.patching.result.cleanDiff,
                                                corruptedDiff: x.patching.result.corruptedDiff}};
    });
    await page.waitForSelector('[data-testid=atp-heads]:not([hidden])', {timeout: kTimeout});
    // A (block, position) cell: the exact patching map measured the same patch.
    const [l, p] = [1, 3];
    const cell = await clickExact('#atp', l, p, `resid:${l}.${p}`);
    const unit = s.patching.cleanDiff - s.patching.corruptedDiff;
    closeTo(cell.value, s.patching.recovered[l * s.atp.tokens + p] * unit, 2e-3, 'resid cell against the exact map');
    assert.match(await page.getByTestId('atp-exact').textContent(),
                 new RegExp(`stream entering block ${l} at position ${p} .*changes the logit difference`));
    // Head cells: the same call through the bindings under Node (checked against PyTorch in
    // gradients-embind.test.mjs).
    const {engine} = await nodeEngine(models.model);
    const clean = engine.tokenize(s.request.clean), corrupted = engine.tokenize(s.request.corrupted);
    const heads = [[1, 2], [0, 1], [1, 0]];
    for (const [hl, hh] of heads) {
      const got = await clickExact('#atp-heads', hl, hh, `head:${hl}.${hh}`);
      const want = engine.atpExact(clean, corrupted, 'head', hl, hh, s.atp.target, s.atp.contrast);
      closeTo(got.value, want.value, 1e-4, `head ${hl}.${hh}`);
      assert.equal(Number(await page.getByTestId('atp-exact').getAttribute('data-exact')), got.value);
      assert.match(await page.getByTestId('atp-exact').textContent(),
                   new RegExp(`head ${hl}\\.${hh} \\(its output at every position\\).*\\(estimate `));
    }
    engine.delete();
    const r = Number(await page.getByTestId('atp-exact').getAttribute('data-head-correlation'));
    assert.ok(Number.isFinite(r) && r >= -1 && r <= 1, `head correlation ${r}`);
  });
});
