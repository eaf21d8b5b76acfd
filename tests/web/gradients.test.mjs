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
});
