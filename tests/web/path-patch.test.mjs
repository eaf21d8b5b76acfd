// Path patching in headless Chromium against the native CLI: the patching panel's sweep (every
// head the sender, to the logits or to heads' q/k/v) must give `gpt2 path-patch --sweep`'s
// numbers (both run the lab's code, with int8 activations for Q8_0 weights), with progress,
// cancel, and a clicked sender's paths drawn.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {kRoot, openSite} from './browser.mjs';
import {closeTo, kNative, makeModels, modelDir} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 60_000;
const kClean = 'The quick brown fox jumps over';
const kCorrupted = 'The slow brown fox jumps over';  // the same 6 tokens, one changed

// `gpt2 path-patch --sweep`'s lines as {"L.H": value}.
function nativeSweep(model, receivers) {
  const out = execFileSync(path.join(kNative, 'gpt2'), [
    'path-patch', '--model', model, '--clean', kClean, '--corrupt', kCorrupted, '--sweep',
    '--receivers', receivers, '--threads', '1'], {encoding: 'utf8'});
  return Object.fromEntries(out.trimEnd().split('\n').map((line) => {
    const [head, value] = line.split('\t');
    return [head, Number(value)];
  }));
}

function nativeOne(model, sender, receivers) {
  const out = execFileSync(path.join(kNative, 'gpt2'), [
    'path-patch', '--model', model, '--clean', kClean, '--corrupt', kCorrupted, '--sender', sender,
    '--receivers', receivers, '--threads', '1'], {encoding: 'utf8'});
  const v = Object.fromEntries(out.trimEnd().split('\n').map((line) => line.split('\t')));
  return Number(v.metric) - Number(v.clean);
}

describe('path patching in the page', {skip: !fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built'}, () => {
  let models, server, browser, page;
  let consoleLines = [];

  before(async () => {
    models = makeModels('path-patch');
    ({server, browser, page, consoleLines} = await openSite({site: kSite, models: modelDir('path-patch'), timeout: kTimeout}));
    await page.getByTestId('patch-clean').fill(kClean);
    await page.getByTestId('patch-corrupted').fill(kCorrupted);
  });

  after(async () => {
    if (consoleLines.length) console.log(consoleLines.join('\n'));
    await browser?.close();
    await server?.close();
  });

  async function sweep(receivers) {
    await page.getByTestId('path-patch-receivers').fill(receivers);
    await page.getByTestId('path-patch-run').click();
    await page.waitForFunction(() => window.gpt2Page.state.pathPatch.result ||
                                     !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
    assert.equal(await page.getByTestId('error').isVisible(), false, await page.getByTestId('error').textContent());
    await page.waitForFunction(() => !document.querySelector('[data-testid=path-patch-run]').disabled);
    return page.getByTestId('path-patch-grid').locator('button[data-layer]').evaluateAll(
        (cells) => cells.map((b) => ({testid: b.dataset.testid, layer: Number(b.dataset.layer), head: Number(b.dataset.head),
                                      value: Number(b.dataset.value)})));
  }

  for (const receivers of ['logits', '1.0.q,1.2.k,1.3.v']) {
    test(`the sweep to ${receivers} equals the CLI's`, async () => {
      const want = nativeSweep(models.model, receivers);
      const cells = await sweep(receivers);
      assert.equal(cells.length, Object.keys(want).length);
      for (const c of cells) {
        assert.equal(c.testid, `path-patch-cell-${c.layer}-${c.head}`);
        closeTo(c.value, want[`${c.layer}.${c.head}`], 1e-3, `sender ${c.layer}.${c.head}`);
      }
      // Something flows: a sweep of zeros would pass the comparison above trivially.
      assert.ok(cells.some((c) => Math.abs(c.value) > 1e-3), 'some sender moves the metric');
      const status = await page.getByTestId('path-patch-status').textContent();
      assert.match(status, new RegExp(`Receivers: ${receivers.replace(/\./g, '\\.')}`));
    });
  }

  test('clicking a sender draws its strongest paths, each the CLI\'s run to that receiver alone', async () => {
    await sweep('logits');
    await page.getByTestId('path-patch-cell-0-1').click();
    await page.waitForFunction(() => window.gpt2Page.state.pathPatch.paths ||
                                     !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
    assert.equal(await page.getByTestId('error').isVisible(), false, await page.getByTestId('error').textContent());
    const reply = await page.evaluate(() => window.gpt2Page.state.pathPatch.paths);
    assert.equal(reply.cancelled, false);
    // The logits, then every head of block 1 (the tiny model's only later block), last block first.
    assert.deepEqual(reply.paths.map((p) => p.receiver), ['logits', '1.0', '1.1', '1.2', '1.3']);
    for (const p of reply.paths) {
      const spec = p.receiver === 'logits' ? 'logits' : ['q', 'k', 'v'].map((x) => `${p.receiver}.${x}`).join(',');
      closeTo(p.value, nativeOne(models.model, '0.1', spec), 1e-3, `path to ${p.receiver}`);
    }
    const drawn = await page.getByTestId('path-patch-paths').locator('path[data-receiver]').count();
    assert.equal(drawn, reply.paths.length);
    assert.match(await page.getByTestId('path-patch-paths').textContent(), /Sender 0\.1, its strongest paths/);
  });

  test('progress and cancel: a cancelled sweep stops early and the page works on', async () => {
    await page.getByTestId('path-patch-receivers').fill('1.0.q,1.1.k,1.2.v,1.3.q');
    // Both clicks in one task, so the cancel reaches the worker while the job runs (the tiny model's
    // sweep would otherwise end first): the job stops after its first call.
    await page.evaluate(() => {
      document.querySelector('[data-testid=path-patch-run]').click();
      document.querySelector('[data-testid=path-patch-cancel]').click();
    });
    await page.waitForFunction(() => window.gpt2Page.state.pathPatch.result ||
                                     !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
    const r = await page.evaluate(() => {
      const x = window.gpt2Page.state.pathPatch.result;
      return {done: x.done, total: x.total, cancelled: x.cancelled, values: Array.from(x.values)};
    });
    assert.equal(r.cancelled, true);
    assert.ok(r.done < r.total, `${r.done} of ${r.total} run`);
    assert.equal(r.values.filter((v) => !Number.isNaN(v)).length, r.done, 'cells not run stay empty');
    assert.match(await page.getByTestId('path-patch-status').textContent(), /Cancelled after/);
    assert.equal(await page.getByTestId('path-patch-run').isDisabled(), false);
    assert.equal(await page.getByTestId('error').isVisible(), false);
    assert.deepEqual(consoleLines.filter((l) => l.startsWith('[pageerror]')), []);
  });
});
