// The page in real headless Chromium (Debian's /usr/bin/chromium driven by playwright-core):
// download with progress, generation equal to the native CLI, the views equal to native
// `inspect`, the Cache API on a second visit, manifests of parts, local files, sub-paths and
// plain-words errors. Screenshots go to test-artifacts/.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {artifact, kRoot, launchBrowser, serveSite, watchConsole} from './browser.mjs';
import {closeTo, kPrompt, modelDir, kSampling, makeModels, nativeGenerate, nativeInspect, norm, row, tensor} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 60_000;

async function waitLoaded(page) {
  await page.waitForFunction(() => {
    const bar = document.querySelector('[data-testid=progress]');
    const err = document.querySelector('[data-testid=error]');
    return (bar.value === 100 && bar.dataset.source) || !err.hidden;
  }, null, {timeout: kTimeout});
  const err = page.getByTestId('error');
  if (await err.isVisible()) throw new Error(`page error while loading: ${await err.textContent()}`);
}

async function setSampling(page, s = kSampling) {
  await page.getByTestId('temperature').fill(String(s.temperature));
  await page.getByTestId('top-k').fill(String(s.topK));
  await page.getByTestId('top-p').fill(String(s.topP));
  await page.getByTestId('seed').fill(String(s.seed));
  await page.getByTestId('max-tokens').fill(String(s.maxTokens));
}

async function generate(page, prompt = kPrompt) {
  await page.getByTestId('prompt').fill(prompt);
  await page.getByTestId('generate').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=stats]').dataset.reason ||
                                   !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
}

async function errorText(page) {
  await page.getByTestId('error').waitFor({state: 'visible', timeout: kTimeout});
  return page.getByTestId('error').textContent();
}

describe('the page in headless Chromium', {skip: !fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built'}, () => {
  let models, server, browser, expectedIds, inspect;
  const consoleLines = [];

  before(async () => {
    models = makeModels('page');
    expectedIds = nativeGenerate(models.model);
    inspect = nativeInspect(models.model);
    server = await serveSite({site: kSite, models: modelDir('page')});
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  test('loads a model, generates the native ids and shows matching activations', async () => {
    const page = await browser.context.newPage();
    consoleLines.push(...watchConsole(page));
    await page.goto(server.url + '?debug=1');
    await page.getByTestId('model-url').fill('models/tiny-q8_0.gguf');
    await page.waitForFunction(() => !document.querySelector('[data-testid=load]').disabled);
    await page.getByTestId('load').click();
    await waitLoaded(page);
    const bar = page.getByTestId('progress');
    assert.equal(await bar.evaluate((b) => b.value), 100);
    assert.equal(await bar.getAttribute('data-loaded'), String(models.size), 'byte-accurate progress');
    assert.equal(await bar.getAttribute('data-source'), 'network');
    assert.equal(server.requests('/models/tiny-q8_0.gguf'), 1);

    await setSampling(page);
    await generate(page);
    const ids = (await page.getByTestId('output-ids').textContent()).trim().split(/\s+/).map(Number);
    assert.deepEqual(ids, expectedIds, 'sampled ids equal `gpt2 generate` for the same seed');
    const stats = await page.getByTestId('stats').textContent();
    assert.match(stats, /tokens\/s/);
    assert.match(stats, /prefill \d+ ms/);
    const chips = await page.getByTestId('tokens').locator('.chip').count();
    assert.equal(chips, inspect.ids.length + ids.length);

    // The page picks the last prompt token once generation ends; wait for every view.
    const T = inspect.ids.length, p = T - 1, H = inspect.config.n_head, C = inspect.config.n_embd;
    await page.waitForSelector('[data-testid=logit-lens] .lens-cell', {timeout: kTimeout});
    await page.waitForSelector('[data-testid=probs] li');

    // Attention grid: every block x head strip holds the picked token's probabilities.
    for (let l = 0; l < inspect.config.n_layer; ++l) {
      const probs = tensor(inspect, 'attn_probs', l);
      for (let h = 0; h < H; ++h) {
        // The rows live in the page's state (?debug=1 exposes it), not in the DOM.
        assert.equal(await page.locator(`[data-testid=attention-grid] .attn-cell[data-layer="${l}"][data-head="${h}"]`).count(), 1);
        const values = await page.evaluate(([l, h, p]) => Array.from(
            window.gpt2Page.state.acts.attention[l].subarray(h * (p + 1), (h + 1) * (p + 1))), [l, h, p]);
        assert.equal(values.length, p + 1);
        values.forEach((v, k) => closeTo(v, probs.data[(h * T + p) * T + k], 2e-3, `attention l${l} h${h} k${k}`));
      }
    }

    // Residual view: keyboard to a cell and read the number it announces.
    const residual = page.getByTestId('residual');
    await residual.focus();
    const readout = page.locator('#residual-readout');
    closeTo(await readout.getAttribute('data-value'), norm(row(tensor(inspect, 'embed', -1), 0, C)), 1e-3, 'embed norm p0');
    await residual.press('ArrowDown');
    await residual.press('ArrowRight');
    assert.equal(await readout.getAttribute('data-row'), '1');
    closeTo(await readout.getAttribute('data-value'), norm(row(tensor(inspect, 'resid_out', 0), 1, C)), 5e-3, 'resid norm l0 p1');

    // Final probabilities at the picked token.
    const probItems = page.locator('[data-testid=probs] li');
    const fin = inspect.final[p];
    for (let k = 0; k < 3; ++k) {
      assert.equal(Number(await probItems.nth(k).getAttribute('data-id')), fin.top_ids[k], `final top-${k} id`);
      closeTo(await probItems.nth(k).getAttribute('data-prob'), fin.top_probs[k], 2e-3, `final top-${k} prob`);
    }

    // Logit lens: every prompt cell's top token and probability; a click shows the top 10.
    for (const e of inspect.logit_lens) {
      const cell = page.locator(`[data-testid=logit-lens] .lens-cell[data-layer="${e.layer}"][data-position="${e.position}"]`);
      assert.equal(Number(await cell.getAttribute('data-id')), e.top_ids[0], `lens id l${e.layer} p${e.position}`);
      closeTo(await cell.getAttribute('data-prob'), e.top_probs[0], 2e-3, `lens prob l${e.layer} p${e.position}`);
    }
    const e0 = inspect.logit_lens.find((e) => e.layer === 0 && e.position === 1);
    await page.locator('[data-testid=logit-lens] .lens-cell[data-layer="0"][data-position="1"]').click();
    const detailIds = await page.locator('#lens-detail li').evaluateAll((lis) => lis.map((li) => Number(li.dataset.id)));
    assert.deepEqual(detailIds, e0.top_ids.slice(0, 10));

    // MLP: the strongest neuron of block 0 at the picked token.
    const act = row(tensor(inspect, 'mlp_act', 0), p, inspect.config.n_ff);
    let best = 0;
    act.forEach((v, i) => { if (Math.abs(v) > Math.abs(act[best])) best = i; });
    const first = page.locator('[data-testid=mlp] li').first();
    assert.equal(Number(await first.getAttribute('data-neuron')), best);
    closeTo(await first.getAttribute('data-value'), act[best], 2e-3, 'strongest neuron');

    // Keyboard: pick the first token with Home and see the views follow.
    await page.locator('[data-testid=tokens] .chip.picked').focus();
    await page.keyboard.press('Home');
    await page.waitForFunction(() => document.querySelector('[data-testid=tokens] .chip[data-position="0"]').classList.contains('picked'));
    await page.waitForFunction(() => window.gpt2Page.state.acts.position === 0 &&
                                     document.querySelector('[data-testid=attention-grid]').dataset.position === '0');
    assert.equal(await page.locator('[data-values]').count(), 0, 'no test data in the production DOM');
    await page.keyboard.press('End');
    await page.waitForTimeout(300);
    await page.screenshot({path: artifact('page-generated.png'), fullPage: true});
    await page.close();
  });

  test('a second visit loads the model from the cache without downloading it', async () => {
    const before = server.requests('/models/tiny-q8_0.gguf');
    const page = await browser.context.newPage();
    consoleLines.push(...watchConsole(page));
    // The model URL as a query parameter: the page loads a cached model without a click.
    await page.goto(server.url + '?model=models/tiny-q8_0.gguf');
    await waitLoaded(page);
    assert.equal(await page.getByTestId('progress').getAttribute('data-source'), 'cache');
    assert.equal(server.requests('/models/tiny-q8_0.gguf'), before, 'no request for the model');
    await setSampling(page);
    await generate(page);
    const ids = (await page.getByTestId('output-ids').textContent()).trim().split(/\s+/).map(Number);
    assert.deepEqual(ids, expectedIds);
    // Clearing the cache makes the next load download again.
    await page.getByTestId('clear-cache').click();
    await page.waitForFunction(() => /Cache cleared/.test(document.getElementById('cache-info').textContent));
    await page.getByTestId('load').click();
    await waitLoaded(page);
    assert.equal(await page.getByTestId('progress').getAttribute('data-source'), 'network');
    assert.equal(server.requests('/models/tiny-q8_0.gguf'), before + 1);
    await page.close();
  });

  test('a model split into parts loads from its manifest', async () => {
    const page = await browser.context.newPage();
    await page.goto(server.url);
    await page.getByTestId('model-url').fill('models/tiny-split.json');
    await page.waitForFunction(() => !document.querySelector('[data-testid=load]').disabled);
    await page.getByTestId('load').click();
    await waitLoaded(page);
    assert.equal(await page.getByTestId('progress').getAttribute('data-loaded'), String(models.size));
    await setSampling(page);
    await generate(page);
    const ids = (await page.getByTestId('output-ids').textContent()).trim().split(/\s+/).map(Number);
    assert.deepEqual(ids, expectedIds);
    await page.close();
  });

  test('a local file opens through the file input', async () => {
    const page = await browser.context.newPage();
    await page.goto(server.url);
    await page.waitForFunction(() => !document.querySelector('[data-testid=model-file]').disabled);
    await page.getByTestId('model-file').setInputFiles(models.model);
    await waitLoaded(page);
    assert.equal(await page.getByTestId('progress').getAttribute('data-source'), 'file');
    await page.close();
  });

  test('errors are shown in plain words', async () => {
    const page = await browser.context.newPage();
    await page.goto(server.url);
    await page.waitForFunction(() => !document.querySelector('[data-testid=load]').disabled);
    const tryLoad = async (url) => {
      await page.getByTestId('model-url').fill(url);
      await page.getByTestId('load').click();
      return errorText(page);
    };
    assert.match(await tryLoad('models/truncated.gguf'), /damaged or incomplete|truncated|past the end|outside/i);
    await page.screenshot({path: artifact('page-error-truncated.png')});
    assert.match(await tryLoad('models/not-a-model.gguf'), /not a GGUF/i);
    assert.match(await tryLoad('models/missing.gguf'), /server answered 404/);
    assert.match(await tryLoad('http://127.0.0.1:9/model.gguf'), /unreachable/);
    // A failed load must not be cached.
    const cached = await page.evaluate(async () => (await (await caches.open('gpt2-models-v1')).keys()).map((r) => r.url));
    assert.ok(!cached.some((u) => /truncated|not-a-model/.test(u)), `cached: ${cached}`);
    // A prompt longer than the 64-token context.
    await page.getByTestId('model-url').fill('models/tiny-q8_0.gguf');
    await page.getByTestId('load').click();
    await waitLoaded(page);
    await generate(page, 'one two three four five six seven eight nine ten '.repeat(8));
    assert.match(await errorText(page), /longer than the model's context of 64 tokens/);
    await page.close();
  });

  test('works under a sub-path with only relative URLs', async () => {
    const sub = await serveSite({site: kSite, models: modelDir('page'), base: '/some/sub/path/'});
    try {
      const page = await browser.context.newPage();
      await page.goto(sub.url + '?model=models/tiny-q8_0.gguf');
      await page.waitForFunction(() => !document.querySelector('[data-testid=load]').disabled);
      await page.getByTestId('load').click();
      await waitLoaded(page);
      assert.equal(await page.getByTestId('progress').evaluate((b) => b.value), 100);
      assert.equal(sub.requests('/some/sub/path/models/tiny-q8_0.gguf'), 1);
      // Chromium has relaxed SIMD, so the worker starts the relaxed twin (web/worker/relaxed-simd.js).
      assert.ok(sub.requests('/some/sub/path/worker/gpt2-engine-relaxed.wasm') >= 1);
      await page.close();
    } finally {
      await sub.close();
    }
  });
});
