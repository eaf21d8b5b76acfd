// The page's store owns the interventions (issue 35): after an edit, with no new generation and
// no "Run again", saliency and an SAE read run under the interventions the page shows, not under
// those the engine received last, and say so beside the result. The reference is the same engine
// under Node (build/wasm/web/gpt2-engine-node.cjs) with those interventions set explicitly; the
// plain model's values are checked to differ, so a stale run fails.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {kRoot, launchBrowser, serveSite, watchConsole} from './browser.mjs';
import {canonical} from '../../web/shared/interventions.js';
import {closeTo, kNative, kNodeModule, kPrompt, kSampling, makeModels, modelDir, nodeEngine} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 60_000;
const kSaeData = path.join(kRoot, 'tests/data/sae/standard');  // blocks.1.hook_resid_pre
const skip = (!fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built') ||
             (!fs.existsSync(kNodeModule) && 'build/wasm not built') ||
             (!fs.existsSync(path.join(kNative, 'gpt2-convert')) && 'build/native not built') ||
             (!fs.existsSync(kSaeData) && 'tests/data/sae missing');
// Both change the stream entering block 1, where the SAE reads.
const kInterventions = {ablateHeads: [[0, 1]], skipMlp: [0]};
const kUnderWords = /^Computed under: 1 head knocked out \(0\.1\), MLP skipped in block 0\.$/;

describe('the interventions the page shows are the ones every tool runs under', {skip}, () => {
  let models, server, browser, page, saeGguf;
  const consoleLines = [];

  async function pageError() {
    const err = page.getByTestId('error');
    return (await err.isVisible()) ? err.textContent() : '';
  }

  async function waitFor(fn, arg) {
    await page.waitForFunction(fn, arg, {timeout: kTimeout});
    const err = await pageError();
    if (err) throw new Error(`page error: ${err}`);
  }

  // The page's saliency (gradient x input) at the picked token, for the target it chose.
  async function pageSaliency() {
    await page.evaluate(() => window.gpt2Page.set({saliency: null}));
    await page.getByTestId('saliency-run').click();
    await waitFor(() => window.gpt2Page.state.saliency || !document.querySelector('[data-testid=error]').hidden);
    return page.evaluate(() => {
      window.gpt2Page.flush();  // the views draw on the next frame: the tests read them now
      const s = window.gpt2Page.state.saliency;
      return {values: Array.from(s.values), total: s.total, position: s.position, target: s.target};
    });
  }

  // The SAE's features at position p, read when the token is picked.
  async function pageFeatures(p) {
    await page.evaluate(() => window.gpt2Page.set({saeFeatures: null}));
    await page.locator(`[data-testid=tokens] .chip[data-position="${p}"]`).click();
    await waitFor((pos) => window.gpt2Page.state.saeFeatures?.position === pos ||
                           !document.querySelector('[data-testid=error]').hidden, p);
    return page.evaluate(() => {
      window.gpt2Page.flush();
      const f = window.gpt2Page.state.saeFeatures;
      return {features: Array.from(f.features), activations: Array.from(f.activations)};
    });
  }

  // The same engine under Node on the page's conversation with `iv` set explicitly.
  async function reference(ids, iv, saliency, position) {
    const {engine} = await nodeEngine(models.model);
    try {
      const sae = engine.loadSae(fs.readFileSync(saeGguf));
      engine.setInterventions(iv);
      engine.reset();
      engine.setCapture(true);
      engine.prefill(ids);
      const f = engine.saeFeatures(sae.id, position, 10);
      const features = {features: Array.from(f.features), activations: Array.from(f.activations)};
      const s = engine.saliency(saliency.position, saliency.target, -1, 'grad', 16);
      return {features, saliency: {values: Array.from(s.values), total: s.total}};
    } finally {
      engine.delete();
    }
  }

  function sameSaliency(got, want, what) {
    assert.equal(got.values.length, want.values.length);
    const scale = Math.max(1e-6, ...want.values.map(Math.abs));
    got.values.forEach((v, p) => closeTo(v / scale, want.values[p] / scale, 1e-3, `${what}: value ${p}`));
    closeTo(got.total / scale, want.total / scale, 1e-3, `${what}: total`);
  }

  function sameFeatures(got, want, what) {
    assert.deepEqual(got.features, want.features, `${what}: the features, in order`);
    got.activations.forEach((a, i) => closeTo(a, want.activations[i], 2e-3, `${what}: activation ${i}`));
  }

  before(async () => {
    models = makeModels('under');
    const dir = modelDir('under');
    fs.mkdirSync(path.join(dir, 'sae', 'standard'), {recursive: true});
    for (const file of ['cfg.json', 'sae_weights.safetensors']) {
      fs.copyFileSync(path.join(kSaeData, file), path.join(dir, 'sae', 'standard', file));
    }
    // The page converts the SAELens pair to Q8_0 in its worker, as gpt2-convert does here.
    saeGguf = path.join(dir, 'sae-standard-q8_0.gguf');
    execFileSync(path.join(kNative, 'gpt2-convert'), ['--sae', kSaeData, '--output', saeGguf, '--type', 'q8_0'], {stdio: 'pipe'});
    server = await serveSite({site: kSite, models: dir});
    browser = await launchBrowser();
    page = await browser.context.newPage();
    consoleLines.push(...watchConsole(page));
    await page.goto(server.url + '?model=models/tiny-q8_0.gguf&debug=1');
    await waitFor(() => document.querySelector('[data-testid=progress]').dataset.source ||
                        !document.querySelector('[data-testid=error]').hidden);
    for (const [id, v] of Object.entries({temperature: kSampling.temperature, 'top-k': kSampling.topK,
                                          'top-p': kSampling.topP, seed: kSampling.seed, 'max-tokens': kSampling.maxTokens})) {
      await page.getByTestId(id).fill(String(v));
    }
    await page.getByTestId('prompt').fill(kPrompt);
    await page.getByTestId('generate').click();
    await waitFor(() => document.querySelector('[data-testid=stats]').dataset.reason ||
                        !document.querySelector('[data-testid=error]').hidden);
    await page.getByTestId('sae-url').fill('models/sae/standard');
    await page.getByTestId('sae-load-url').click();
    await waitFor(() => /ready/.test(document.querySelector('[data-testid=sae-status]').textContent) ||
                        !document.querySelector('[data-testid=error]').hidden);
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  test('saliency and the SAE read after an edit, without generating again, equal the engine under them', async () => {
    const ids = await page.evaluate(() => window.gpt2Page.state.ids.slice());
    const T = await page.evaluate(() => window.gpt2Page.state.promptLength);
    // The generation ran plain: its reads say so.
    const plainFeatures = await pageFeatures(T - 1);
    assert.match(await page.getByTestId('sae-features-under').textContent(), /^Computed under: plain model\.$/);
    const plainSaliency = await pageSaliency();
    assert.match(await page.getByTestId('saliency-under').textContent(), /^Computed under: plain model\.$/);

    // The edits: a head of block 0 knocked out (the knock-out mode of the attention grid) and
    // block 0's MLP skipped. Nothing is generated or run again.
    await page.getByTestId('exp-knock-mode').check();
    await page.locator('[data-testid=attention-grid] .attn-cell[data-layer="0"][data-head="1"]').click();
    await page.getByTestId('exp-knock-mode').uncheck();
    assert.equal(await page.evaluate(() => window.gpt2Page.state.layer), 0);
    await page.getByTestId('exp-skip-mlp').check();
    assert.match(await page.getByTestId('exp-summary').textContent(), /head 0\.1 knocked out, block 0 MLP skipped/);
    // The results on screen were computed before the edit: they still say plain.
    assert.match(await page.getByTestId('saliency-under').textContent(), /^Computed under: plain model\.$/);

    const saliency = await pageSaliency();
    assert.deepEqual([saliency.position, saliency.target], [plainSaliency.position, plainSaliency.target]);
    assert.match(await page.getByTestId('saliency-under').textContent(), kUnderWords);
    const features = await pageFeatures(T - 1);
    assert.match(await page.getByTestId('sae-features-under').textContent(), kUnderWords);
    // The views of the picked token ran under them too.
    assert.match(await page.getByTestId('inspect-under').textContent(), kUnderWords);
    assert.deepEqual(await page.evaluate(() => window.gpt2Page.state.ids), ids, 'no new generation');

    const want = await reference(ids, kInterventions, saliency, T - 1);
    sameSaliency(saliency, want.saliency, 'saliency under the edits');
    sameFeatures(features, want.features, 'features under the edits');
    const plain = await reference(ids, {}, saliency, T - 1);
    sameSaliency(plainSaliency, plain.saliency, 'plain saliency');
    sameFeatures(plainFeatures, plain.features, 'plain features');
    // The edits change both, so a run under the stale (plain) interventions would have failed above.
    const scale = Math.max(...plain.saliency.values.map(Math.abs));
    assert.ok(want.saliency.values.some((v, p) => Math.abs(v - plain.saliency.values[p]) > 1e-2 * scale),
              'the edits change the saliency');
    assert.ok(Math.abs(want.features.activations[0] - plain.features.activations[0]) > 1e-2 ||
              want.features.features[0] !== plain.features.features[0], 'the edits change the features');

    // Back to the plain model (Reset): the next read runs plain again.
    await page.getByTestId('exp-reset').click();
    sameSaliency(await pageSaliency(), plain.saliency, 'plain saliency after Reset');
    assert.match(await page.getByTestId('saliency-under').textContent(), /^Computed under: plain model\.$/);
  });
});

// The worker's part alone (web/worker/worker-under.js) on the engine under Node: what it sets is what a
// generation under the same interventions holds, mean ablation's prompt means included.
describe('worker-under.js on the engine under Node', {skip: !fs.existsSync(kNodeModule) && 'build/wasm not built'}, () => {
  test('ensure() after a plain generation equals generating under the interventions', async () => {
    const {createUnder} = await import('../../web/worker/worker-under.js');
    const models = makeModels('under');
    const {engine} = await nodeEngine(models.model);
    try {
      const ids = Array.from(engine.tokenize(kPrompt));
      const P = ids.length, settings = {temperature: 0, topK: 0, topP: 1, seed: 1, maxTokens: 0, capture: true};
      const topUnder = (iv) => {
        engine.startGeneration(ids, settings, iv);
        return Array.from(engine.topProbs(P - 1).probs);
      };
      const under = createUnder();
      under.attach(engine);
      for (const iv of [{ablateHeads: [[1, 2]], meanAblation: true}, {ablateHeads: [[0, 1]], skipMlp: [0]}, {}]) {
        const want = topUnder(iv);
        topUnder({});
        under.ran({});
        const {under: spec, rerun} = under.ensure(iv, {capture: true});
        assert.equal(rerun, Object.keys(iv).length > 0, 'the capture ran again when they changed');
        assert.deepEqual(spec, canonical(iv));
        Array.from(engine.topProbs(P - 1).probs).forEach((p, k) => closeTo(p, want[k], 1e-6, `${JSON.stringify(iv)}: top ${k}`));
        assert.equal(under.ensure(iv, {capture: true}).rerun, false, 'nothing to do the second time');
      }
    } finally {
      engine.delete();
    }
  });
});
