// Saliency on the page in headless Chromium against the native CLI's `gpt2 saliency` on the same
// model: the page forwards to the engine's lab, so its numbers must be the CLI's.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {kRoot, launchBrowser, serveSite, watchConsole} from './browser.mjs';
import {closeTo, kNative, kPrompt, kSampling, makeModels, modelDir, nativeInspect} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 60_000;
const kGpt2 = path.join(kNative, 'gpt2');

describe('saliency on the page', {skip: !fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built'}, () => {
  let models, server, browser, page, T;
  const consoleLines = [];

  before(async () => {
    models = makeModels('gradients');
    T = nativeInspect(models.model).ids.length;
    server = await serveSite({site: kSite, models: modelDir('gradients')});
    browser = await launchBrowser();
    page = await browser.context.newPage();
    consoleLines.push(...watchConsole(page));
    await page.goto(server.url + '?model=models/tiny-q8_0.gguf&debug=1');
    await page.waitForFunction(() => document.querySelector('[data-testid=progress]').dataset.source ||
                                     !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
    for (const [id, v] of Object.entries({temperature: kSampling.temperature, 'top-k': kSampling.topK,
                                          'top-p': kSampling.topP, seed: kSampling.seed, 'max-tokens': kSampling.maxTokens})) {
      await page.getByTestId(id).fill(String(v));
    }
    await page.getByTestId('prompt').fill(kPrompt);
    await page.getByTestId('generate').click();
    await page.waitForSelector('[data-testid=probs] li', {timeout: kTimeout});
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
              metric: x.metric, metricCorrupt: x.metricCorrupt, nLayer: x.nLayer, nHead: x.nHead, T: x.positions};
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
});
