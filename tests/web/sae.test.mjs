// Sparse autoencoders in headless Chromium against the native CLI built from the same sources
// (an independent build: native Highway targets against WebAssembly SIMD128). The SAE is
// scripts/make_golden.py's random one in SAELens's layout on the tiny test model
// (tests/data/sae/standard, blocks.1.hook_resid_pre); the page converts it to Q8_0 in its worker,
// as `gpt2-convert --sae DIR --type q8_0` does for the CLI. Checked: loading from a fake Hugging
// Face (fake-hf.mjs: the CDN redirect, CORS, another origin) and from the page's cache on a
// second visit with no request; the picked token's features and a feature's strip equal
// `gpt2 features`; steered generation equals `gpt2 generate --sae --steer`; a clamp's before and
// after equal `gpt2 inspect/generate --sae --clamp`; a shared link loads the SAE and its steering
// again; a dropped download resumes by Range, or fails clearly with nothing cached; a bad cfg.json
// shows the converter's error; a .gguf from gpt2-convert --sae loads from a local file.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import {after, before, describe, test} from 'node:test';
import {kRoot, launchBrowser, serveSite, watchConsole} from './browser.mjs';
import {startFakeHf} from './fake-hf.mjs';
import {closeTo, inspectProbs, klDivergence, kNative, kPrompt, kSampling, makeModels, modelDir, nativeGenerate, nativeInspect} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 90_000;
const kGpt2 = path.join(kNative, 'gpt2');
const kSaeData = path.join(kRoot, 'tests/data/sae/standard');
const kHook = 'blocks.1.hook_resid_pre';
const skip = (!fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built') ||
             (!fs.existsSync(path.join(kNative, 'gpt2-convert')) && 'build/native not built') ||
             (!fs.existsSync(kSaeData) && 'tests/data/sae missing');
const kTop = 10;  // the page's features per token (app-sae.js)

// `gpt2 features`: {p: [[feature, activation], ...]} for every prompt position (its printed
// lines), and explained[p] (its --json).
function nativeFeatures(model, sae) {
  const json = path.join(path.dirname(sae), 'features.json');
  const out = execFileSync(kGpt2, ['features', '--model', model, '--sae', sae, '--prompt', kPrompt, '--top', String(kTop),
                                   '--threads', '1', '--json', json], {encoding: 'utf8'});
  const byPosition = {};
  for (const line of out.trimEnd().split('\n')) {
    const [p, f, a] = line.split('\t');
    (byPosition[p] ||= []).push([Number(f), Number(a)]);
  }
  const explained = JSON.parse(fs.readFileSync(json, 'utf8')).positions.map((x) => x.explained);
  return {byPosition, explained};
}


async function pageError(page) {
  const err = page.getByTestId('error');
  return (await err.isVisible()) ? err.textContent() : '';
}

// Waits for the SAE load the page started: its status says ready, or an error shows.
async function waitSae(page) {
  await page.waitForFunction(() => /ready/.test(document.querySelector('[data-testid=sae-status]').textContent) ||
                                   !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
  return page.getByTestId('sae-status').textContent();
}

async function generatePage(page) {
  for (const [id, v] of Object.entries({temperature: kSampling.temperature, 'top-k': kSampling.topK, 'top-p': kSampling.topP,
                                        seed: kSampling.seed, 'max-tokens': kSampling.maxTokens})) {
    await page.getByTestId(id).fill(String(v));
  }
  await page.getByTestId('prompt').fill(kPrompt);
  await page.evaluate(() => { delete document.querySelector('[data-testid=stats]').dataset.reason; });
  await page.getByTestId('generate').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=stats]').dataset.reason ||
                                   !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
  const err = await pageError(page);
  if (err) throw new Error(`page error while generating: ${err}`);
  return (await page.getByTestId('output-ids').textContent()).trim().split(/\s+/).map(Number);
}

// The page's features at position p: [[feature, activation], ...] in its order.
async function pageFeatures(page, p) {
  await page.locator(`[data-testid=tokens] .chip[data-position="${p}"]`).click();
  await page.waitForFunction((pos) => window.gpt2Page.state.saeFeatures?.position === pos &&
                                      document.querySelector('[data-testid=sae-explained]'), p, {timeout: kTimeout});
  return page.locator('[data-testid=sae-features] button[data-feature]').evaluateAll(
      (bs) => bs.map((b) => [Number(b.dataset.feature), Number(b.dataset.activation)]));
}

function sameFeatures(page, native, what) {
  assert.deepEqual(page.map(([f]) => f), native.map(([f]) => f), `${what}: the features, in order`);
  page.forEach(([, a], i) => closeTo(a, native[i][1], 2e-3, `${what}: feature ${native[i][0]}'s activation`));
}

async function openPage(browser, site, query, consoleLines) {
  const page = await browser.context.newPage();
  consoleLines.push(...watchConsole(page));
  await page.goto(`${site.url}?debug=1${query}`);
  await page.waitForFunction(() => document.querySelector('[data-testid=progress]').dataset.source ||
                                   !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
  const err = await pageError(page);
  if (err) throw new Error(`page error while loading the model: ${err}`);
  return page;
}

const saeKeys = (page) => page.evaluate(async () =>
  (await (await caches.open('gpt2-models-v1')).keys()).map((r) => r.url).filter((u) => u.endsWith('.q8_0.gguf')));

describe('sparse autoencoders in the page', {skip}, () => {
  let models, dir, site, saeGguf, features, explained, plain, T;
  const saeFiles = {};
  const consoleLines = [];

  before(async () => {
    models = makeModels('sae');
    dir = modelDir('sae');
    // The folder a URL load reads, and one whose cfg.json names an architecture no one supports.
    for (const [name, edit] of [['standard', null], ['bad-cfg', (cfg) => ({...cfg, architecture: 'gated'})],
                                ['wide', (cfg) => ({...cfg, d_in: 768})], ['huge', (cfg) => ({...cfg, d_sae: 1e8})]]) {
      fs.mkdirSync(path.join(dir, 'sae', name), {recursive: true});
      for (const file of ['cfg.json', 'sae_weights.safetensors']) {
        let bytes = fs.readFileSync(path.join(kSaeData, file));
        if (file === 'cfg.json' && edit) bytes = Buffer.from(JSON.stringify(edit(JSON.parse(bytes))));
        fs.writeFileSync(path.join(dir, 'sae', name, file), bytes);
        if (!edit) saeFiles[`${kHook}/${file}`] = bytes;
      }
    }
    saeGguf = path.join(dir, 'sae-standard-q8_0.gguf');
    execFileSync(path.join(kNative, 'gpt2-convert'), ['--sae', kSaeData, '--output', saeGguf, '--type', 'q8_0'], {stdio: 'pipe'});
    ({byPosition: features, explained} = nativeFeatures(models.model, saeGguf));
    plain = nativeInspect(models.model);
    T = plain.ids.length;
    site = await serveSite({site: kSite, models: dir});
  });

  after(async () => {
    await site?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  test('from Hugging Face: the features and a strip equal gpt2 features; a second visit reads the cache', async () => {
    const hf = await startFakeHf({saes: saeFiles});
    const browser = await launchBrowser();
    try {
      const page = await openPage(browser, site, `&model=models/tiny-q8_0.gguf&hf=${encodeURIComponent(hf.origin)}`, consoleLines);
      await generatePage(page);
      assert.equal(await page.getByTestId('sae-hf-2').isDisabled(), true, 'the tiny model has no block 2');
      await page.getByTestId('sae-hf-1').click();
      const status = await waitSae(page);
      assert.equal(await pageError(page), '');
      assert.match(status, /blocks\.1\.hook_resid_pre.*downloaded from Hugging Face, converted and cached/);
      assert.ok(hf.requests.some((q) => q === `GET /jbloom/GPT2-Small-SAEs-Reformatted/resolve/main/${kHook}/cfg.json`),
                hf.requests.join('\n'));
      assert.ok(hf.requests.some((q) => new RegExp(`^GET /cdn/[0-9a-f]{64}/${kHook}/sae_weights\\.safetensors`).test(q)),
                hf.requests.join('\n'));
      assert.equal((await saeKeys(page)).length, 1, 'the conversion is cached');
      for (const p of [0, 3, T - 1]) {
        sameFeatures(await pageFeatures(page, p), features[p], `position ${p}`);
        closeTo(await page.getByTestId('sae-explained').getAttribute('data-explained'), explained[p], 2e-3,
                `explained share at ${p}`);
      }
      // A feature's strip: where the CLI lists it, the same activation; elsewhere no more than the
      // CLI's last listed one (it is not among that position's top).
      const f = features[T - 1][0][0];
      await page.getByTestId(`sae-feature-${f}`).click();
      await page.waitForSelector(`[data-testid=sae-strip-chips][data-feature="${f}"]`, {timeout: kTimeout});
      const strip = await page.locator('[data-testid=sae-strip-chips] .chip').evaluateAll(
          (cs) => cs.map((c) => Number(c.dataset.value)));
      assert.ok(strip.length >= T, `a value per captured position (${strip.length})`);
      for (let p = 0; p < T; ++p) {
        const listed = features[p].find(([g]) => g === f);
        if (listed) closeTo(strip[p], listed[1], 2e-3, `strip at ${p}`);
        else assert.ok(strip[p] <= features[p].at(-1)[1] + 2e-3, `strip at ${p}: ${strip[p]} not in the CLI's top`);
      }
      // Second visit: from the cache, no request.
      const before = hf.requests.length;
      const again = await openPage(browser, site, `&model=models/tiny-q8_0.gguf&hf=${encodeURIComponent(hf.origin)}`, consoleLines);
      await generatePage(again);
      await again.getByTestId('sae-hf-1').click();
      assert.match(await waitSae(again), /from the browser cache/);
      assert.equal(hf.requests.length, before, hf.requests.slice(before).join('\n'));
      sameFeatures(await pageFeatures(again, T - 1), features[T - 1], 'cached SAE');
    } finally {
      await browser.close();
      await hf.close();
    }
  });

  test('steering and clamping equal the CLI; a shared link restores them', async () => {
    const browser = await launchBrowser();
    try {
      const page = await openPage(browser, site, '&model=models/tiny-q8_0.gguf', consoleLines);
      await generatePage(page);
      await page.getByTestId('sae-url').fill('models/sae/standard');
      await page.getByTestId('sae-load-url').click();
      assert.match(await waitSae(page), /downloaded, converted and cached/);
      const f = features[T - 1][0][0];
      // Steer: generation under it.
      await page.getByTestId('sae-edit-feature').fill(String(f));
      await page.getByTestId('sae-edit-mode').selectOption('steer');
      await page.getByTestId('sae-edit-value').fill('8');
      await page.getByTestId('sae-edit-add').click();
      assert.match(await page.getByTestId('exp-summary').textContent(), new RegExp(`feature ${f} steered by 8`));
      const steered = await generatePage(page);
      assert.deepEqual(steered, nativeGenerate(models.model, kPrompt, kSampling, 1, ['--sae', saeGguf, '--steer', `${f}:8`]));
      assert.notDeepEqual(steered, nativeGenerate(models.model, kPrompt, kSampling, 1, []), 'the steering changes the text');
      // The link names the SAE and the steering; opened, it loads both and generates the same.
      await page.getByTestId('share').click();
      const link = await page.getByTestId('share-url').inputValue();
      const q = new URL(link).searchParams;
      assert.equal(q.get('sae'), 'models/sae/standard');
      assert.equal(q.get('sae-steer'), `0.${f}:8`);
      const shared = await browser.context.newPage();
      consoleLines.push(...watchConsole(shared));
      await shared.goto(link + '&debug=1');
      await shared.waitForFunction((n) => document.querySelector('[data-testid=output-ids]').textContent.trim().split(/\s+/).length === n &&
                                          document.querySelector('[data-testid=stats]').dataset.reason, steered.length, {timeout: kTimeout});
      assert.equal(await pageError(shared), '');
      assert.deepEqual((await shared.getByTestId('output-ids').textContent()).trim().split(/\s+/).map(Number), steered);
      assert.match(await shared.getByTestId('sae-edits').textContent(), new RegExp(`feature ${f}: add 8`));
      // Clamp to 0 (ablate) instead, and run again: the same before/after as the CLI.
      await page.locator(`[data-testid=sae-edits] button[data-remove="${(await page.evaluate(() => window.gpt2Page.state.saes[0].id))}:${f}:steer"]`).click();
      await page.getByTestId('sae-edit-mode').selectOption('clamp');
      await page.getByTestId('sae-edit-value').fill('0');
      await page.getByTestId('sae-edit-add').click();
      await generatePage(page);  // the plain text (the clamp is set: generation runs under it)
      await page.locator(`[data-testid=tokens] .chip[data-position="${T - 1}"]`).click();
      await page.evaluate(() => { document.querySelector('[data-testid=sae-exp-kl]').removeAttribute('data-kl'); });
      await page.getByTestId('sae-run-again').click();
      await page.waitForFunction(() => document.querySelector('[data-testid=sae-exp-kl]').dataset.kl !== undefined ||
                                       !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
      assert.equal(await pageError(page), '');
      const clamped = nativeInspect(models.model, kPrompt, ['--sae', saeGguf, '--clamp', `${f}:0`]);
      const before = inspectProbs(plain, T - 1), afterProbs = inspectProbs(clamped, T - 1);
      assert.ok(klDivergence(before, afterProbs) > 1e-3, 'the clamp changes the prediction');
      closeTo(await page.getByTestId('sae-exp-kl').getAttribute('data-kl'), klDivergence(before, afterProbs), 2e-3, 'KL');
      const list = await page.locator('[data-testid=sae-exp-after] li').evaluateAll(
          (lis) => lis.map((li) => ({id: Number(li.dataset.id), prob: Number(li.dataset.prob)})));
      for (const {id, prob} of list.slice(0, 5)) closeTo(prob, afterProbs[id], 2e-3, `clamped probability of ${id}`);
      const order = [...afterProbs.keys()].sort((a, b) => afterProbs[b] - afterProbs[a]);
      assert.deepEqual(list.slice(0, 3).map((x) => x.id), order.slice(0, 3), 'the clamped top 3');
      const textIds = async (id) => (await page.getByTestId(id).getAttribute('data-ids')).split(' ').map(Number);
      assert.deepEqual(await textIds('sae-exp-text-after'),
                       nativeGenerate(models.model, kPrompt, kSampling, 1, ['--sae', saeGguf, '--clamp', `${f}:0`]));
    } finally {
      await browser.close();
    }
  });

  test('a dropped download resumes by Range, or fails clearly with nothing cached', async () => {
    const name = `${kHook}/sae_weights.safetensors`;
    for (const ranges of [true, false]) {
      const hf = await startFakeHf({saes: saeFiles, drop: {[name]: 20_000}, ranges});
      const browser = await launchBrowser();
      try {
        const page = await openPage(browser, site, `&model=models/tiny-q8_0.gguf&hf=${encodeURIComponent(hf.origin)}`, consoleLines);
        await generatePage(page);
        await page.getByTestId('sae-hf-1').click();
        const status = await waitSae(page);
        if (ranges) {
          assert.equal(await pageError(page), '');
          assert.match(status, /ready/);
          assert.ok(hf.requests.some((q) => /sae_weights\.safetensors \(bytes=\d+-\)$/.test(q)), hf.requests.join('\n'));
          sameFeatures(await pageFeatures(page, T - 1), features[T - 1], 'resumed SAE');
          assert.equal((await saeKeys(page)).length, 1);
        } else {
          assert.match(await pageError(page), /could not be resumed.*Nothing was cached/s);
          assert.deepEqual(await saeKeys(page), []);
          assert.equal(await page.locator('[data-testid=sae-list] li').count(), 0);
        }
      } finally {
        await browser.close();
        await hf.close();
      }
    }
  });

  test('several SAEs at once, each with its labels; a new model drops them', async () => {
    const topk = path.join(dir, 'sae-topk-q8_0.gguf');
    execFileSync(path.join(kNative, 'gpt2-convert'), ['--sae', path.join(kRoot, 'tests/data/sae/topk'), '--output', topk,
                                                      '--type', 'q8_0'], {stdio: 'pipe'});
    const topkFeatures = nativeFeatures(models.model, topk).byPosition;
    // Neuronpedia's export for the standard SAE: a label for every feature.
    fs.writeFileSync(path.join(dir, 'labels.jsonl'), Array.from({length: 96}, (_, i) =>
      JSON.stringify({modelId: 'tiny', layer: '1-res', index: String(i), description: `standard feature ${i}`})).join('\n'));
    // ... and for the top-k one gzipped, as Neuronpedia publishes its exports.
    const topkLabels = path.join(dir, 'topk-labels.jsonl.gz');
    fs.writeFileSync(topkLabels, zlib.gzipSync(Array.from({length: 96}, (_, i) =>
      JSON.stringify({index: i, description: `top-k ${i}`})).join('\n')));
    const browser = await launchBrowser();
    try {
      const page = await openPage(browser, site, '&model=models/tiny-q8_0.gguf', consoleLines);
      await generatePage(page);
      await page.getByTestId('sae-url').fill('models/sae/standard');
      await page.getByTestId('sae-url').press('Enter');
      await waitSae(page);
      await page.getByTestId('sae-labels-url').fill('models/labels.jsonl');
      await page.getByTestId('sae-labels-load').click();
      await page.waitForFunction(() => /96 labels/.test(document.querySelector('[data-testid=sae-labels-status]').textContent));
      const [first] = features[T - 1][0];
      await pageFeatures(page, T - 1);
      assert.match(await page.getByTestId(`sae-feature-${first}`).textContent(), new RegExp(`standard feature ${first}$`));
      // By keyboard: down to the second feature, Enter opens its strip.
      const second = features[T - 1][1][0];
      await page.getByTestId(`sae-feature-${first}`).focus();
      await page.keyboard.press('ArrowDown');
      await page.keyboard.press('Enter');
      await page.waitForSelector(`[data-testid=sae-strip-chips][data-feature="${second}"]`, {timeout: kTimeout});
      assert.equal(await page.getByTestId('sae-edit-feature').inputValue(), String(second), 'the feature to steer');
      // The top-k SAE from its two files, converted in the page: now both are loaded.
      await page.evaluate(() => { window.gpt2Page.set({saeStatus: ''}); window.gpt2Page.flush(); });
      await page.getByTestId('sae-file').setInputFiles([path.join(kRoot, 'tests/data/sae/topk/cfg.json'),
                                                        path.join(kRoot, 'tests/data/sae/topk/sae_weights.safetensors')]);
      assert.match(await waitSae(page), /blocks\.1\.hook_attn_out, 96 features, topk \(k 8\).*from the file/);
      assert.equal(await page.locator('[data-testid=sae-list] li').count(), 2);
      const ids = await page.evaluate(() => window.gpt2Page.state.saes.map((x) => x.id));
      assert.equal(await page.getByTestId(`sae-show-${ids[1]}`).isChecked(), true, 'the new SAE is shown');
      sameFeatures(await pageFeatures(page, T - 1), topkFeatures[T - 1], 'top-k SAE');
      assert.ok(topkFeatures[T - 1].length <= 8);
      await page.getByTestId('sae-labels-file').setInputFiles(topkLabels);
      await page.waitForFunction(() => /96 labels from topk-labels\.jsonl\.gz/.test(document.querySelector('[data-testid=sae-labels-status]').textContent));
      assert.match(await page.getByTestId(`sae-feature-${topkFeatures[T - 1][0][0]}`).textContent(), /top-k \d+$/);
      // Back to the first: its features and labels.
      await page.getByTestId(`sae-show-${ids[0]}`).check();
      await page.waitForFunction((id) => window.gpt2Page.state.saeFeatures?.id === id, ids[0]);
      assert.match(await page.getByTestId(`sae-feature-${first}`).textContent(), /standard feature/);
      await page.getByTestId(`sae-drop-${ids[1]}`).click();
      await page.waitForFunction(() => document.querySelectorAll('[data-testid=sae-list] li').length === 1);
      // Another model: the SAEs go with the one they read.
      await page.getByTestId('model-url').fill('models/tiny-q8_0.gguf');
      await page.getByTestId('load').click();
      await page.waitForFunction(() => /dropped with the model/.test(document.querySelector('[data-testid=sae-status]').textContent));
      assert.equal(await page.locator('[data-testid=sae-list] li').count(), 0);
    } finally {
      await browser.close();
    }
  });

  test('the threaded engine (cross-origin isolated) reads the same features and steers alike', async () => {
    const isolated = await serveSite({site: kSite, models: dir, isolate: true});
    const browser = await launchBrowser();
    try {
      const page = await openPage(browser, isolated, '&model=models/tiny-q8_0.gguf&threads=2', consoleLines);
      assert.equal(await page.getByTestId('stats').getAttribute('data-isolated'), 'true');
      await generatePage(page);
      await page.getByTestId('sae-url').fill('models/sae/standard');
      await page.getByTestId('sae-load-url').click();
      assert.match(await waitSae(page), /ready/);
      sameFeatures(await pageFeatures(page, T - 1), features[T - 1], 'threaded engine');
      const f = features[T - 1][0][0];
      await page.getByTestId('sae-edit-feature').fill(String(f));
      await page.getByTestId('sae-edit-value').fill('8');
      await page.getByTestId('sae-edit-add').click();
      assert.deepEqual(await generatePage(page), nativeGenerate(models.model, kPrompt, kSampling, 1, ['--sae', saeGguf, '--steer', `${f}:8`]));
    } finally {
      await browser.close();
      await isolated.close();
    }
  });

  test('a bad cfg.json shows the converter\'s error; a .gguf loads from a local file', async () => {
    const browser = await launchBrowser();
    try {
      const page = await openPage(browser, site, '&model=models/tiny-q8_0.gguf', consoleLines);
      await generatePage(page);
      await page.getByTestId('sae-url').fill('models/sae/bad-cfg');
      await page.getByTestId('sae-load-url').click();
      await waitSae(page);
      assert.match(await pageError(page), /SAE cfg\.json architecture "gated" is not supported/);
      assert.deepEqual(await saeKeys(page), []);
      // An SAE of another model's width is refused from its cfg.json, before its weights download.
      await page.getByTestId('sae-url').fill('models/sae/wide');
      await page.getByTestId('sae-load-url').click();
      await waitSae(page);
      assert.match(await pageError(page), /width 768 \(its cfg\.json's d_in\), but the loaded model's stream has width 64/);
      // One that would not fit in the engine's memory beside the model is refused the same way.
      await page.getByTestId('sae-url').fill('models/sae/huge');
      await page.getByTestId('sae-load-url').click();
      await waitSae(page);
      assert.match(await pageError(page), /This SAE needs about \d+ MB while it loads; beside the model \(\d+ MB\) that is more than/);
      await page.getByTestId('sae-file').setInputFiles(saeGguf);
      assert.match(await waitSae(page), /from the file/);
      sameFeatures(await pageFeatures(page, T - 1), features[T - 1], 'SAE from a file');
    } finally {
      await browser.close();
    }
  });
});
