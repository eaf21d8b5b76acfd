// The core suite, run in both browsers (Chromium through playwright-core, Firefox ESR through
// puppeteer-core over WebDriver BiDi; drivers.mjs) with the same test body: the committed
// offline model (weights/gpt2-tiny-q8_0.gguf) loaded into a cross-origin isolated page with 2
// threads; generation with a seed equal to the native CLI's ids (and so the same in both
// browsers), with 1 thread too; every view drawn and every panel's job run; one experiment, the
// saliency, a sparse autoencoder and an attribution graph against the CLI on the same model. The
// other files in tests/web go deeper, in Chromium only.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {artifact, kRoot, serveSite} from './browser.mjs';
import {kBrowsers, launch} from './drivers.mjs';
import {closeTo, inspectProbs, kNative, kWork, klDivergence, nativeGenerate, nativeInspect} from './fixtures.mjs';
import {parseDashboardText} from '../../web/shared/dashboard.js';

const kSite = path.join(kRoot, 'build/site');
const kTiny = path.join(kRoot, 'weights/gpt2-tiny-q8_0.gguf');
const kDir = path.join(kWork, 'browsers');
const kModel = path.join(kDir, 'gpt2-tiny-q8_0.gguf');
const kGpt2 = path.join(kNative, 'gpt2');
const kTimeout = 60_000;
const kThreads = 2;
// The page's defaults, 16 tokens: on this prompt the native build and the page part at step 16,
// a step decided within rounding (reproducible.test.mjs), and agree before it.
const kPrompt = 'The meaning of life is';
const kSampling = {temperature: 0.8, topK: 40, topP: 1, seed: 1, maxTokens: 16};
const kLong = 40;  // the page's default length: one build gives the same tokens however long
const kSaeHook = 'blocks.1.hook_resid_pre';
const kSaeWidth = 256;
const kTop = 10;  // features the page lists per token (app-sae.js)

const skip = (!fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built') ||
             (!fs.existsSync(kGpt2) && 'build/native not built');

// mulberry32: a few lines of seeded uniform numbers in [0, 1).
function random(seed) {
  return () => {
    seed = (seed + 0x6D2B79F5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// A safetensors file of f32 tensors {name: {shape, data: Float32Array}}: the 8-byte header
// length, the JSON header (padded to 8 bytes), the data in order.
function safetensors(tensors) {
  const header = {};
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    header[name] = {dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + t.data.byteLength]};
    offset += t.data.byteLength;
  }
  const text = JSON.stringify(header);
  const json = Buffer.from(text.padEnd(Math.ceil(text.length / 8) * 8));
  const size = Buffer.alloc(8);
  size.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([size, json, ...Object.values(tensors).map((t) => Buffer.from(t.data.buffer))]);
}

// A random standard SAE in SAELens's layout (cfg.json, sae_weights.safetensors) for the offline
// model's stream (width d) at kSaeHook, written into `dir`.
function writeSae(dir, d) {
  const next = random(2026);
  const tensor = (shape, scale) => ({shape, data: Float32Array.from({length: shape.reduce((a, b) => a * b)},
                                                                    () => (2 * next() - 1) * scale)});
  const tensors = {W_enc: tensor([d, kSaeWidth], 1 / Math.sqrt(d)), b_enc: tensor([kSaeWidth], 0.1),
                   W_dec: tensor([kSaeWidth, d], 1 / Math.sqrt(d)), b_dec: tensor([d], 0.1)};
  fs.mkdirSync(dir, {recursive: true});
  fs.writeFileSync(path.join(dir, 'sae_weights.safetensors'), safetensors(tensors));
  fs.writeFileSync(path.join(dir, 'cfg.json'), JSON.stringify({
    architecture: 'standard', d_in: d, d_sae: kSaeWidth, dtype: 'float32', apply_b_dec_to_input: true,
    normalize_activations: 'none', hook_name: kSaeHook, hook_point_layer: 1}));
}

// Random ReLU transcoders of width kTcWidth for every block of a model of stream width d, in the
// public set's layout (dir/gpt2-small-dun-chl-mlp-tc{L}/sae.json and sae.safetensors); a
// negative encoder bias makes a few features fire.
const kTcWidth = 64;
function writeTranscoders(dir, d, nLayer) {
  const next = random(36);
  for (let l = 0; l < nLayer; ++l) {
    const tensor = (shape, scale, bias = 0) => ({shape, data: Float32Array.from(
        {length: shape.reduce((a, b) => a * b)}, () => bias + (2 * next() - 1) * scale)});
    const tensors = {W_enc: tensor([d, kTcWidth], 1 / Math.sqrt(d)), b_enc: tensor([kTcWidth], 0.1, -0.3),
                     W_dec: tensor([kTcWidth, d], 1 / Math.sqrt(kTcWidth)), b_dec: tensor([d], 0.1)};
    const block = path.join(dir, `gpt2-small-dun-chl-mlp-tc${l}`);
    fs.mkdirSync(block, {recursive: true});
    fs.writeFileSync(path.join(block, 'sae.safetensors'), safetensors(tensors));
    fs.writeFileSync(path.join(block, 'sae.json'), JSON.stringify({d_in: d, d_out: d, d_sae: kTcWidth,
      hook_point: `blocks.${l}.ln2.hook_normalized`, out_hook_point: `blocks.${l}.hook_mlp_out`}));
  }
}

// Native references, computed once for both browsers.
function references() {
  fs.mkdirSync(kDir, {recursive: true});
  fs.copyFileSync(kTiny, kModel);
  const plain = nativeInspect(kModel, kPrompt);
  writeSae(path.join(kDir, 'sae'), plain.config.n_embd);
  const sae = path.join(kDir, 'sae-q8_0.gguf');
  execFileSync(path.join(kNative, 'gpt2-convert'), ['--sae', path.join(kDir, 'sae'), '--output', sae, '--type', 'q8_0'],
               {stdio: 'pipe'});
  const T = plain.ids.length;
  const features = execFileSync(kGpt2, ['features', '--model', kModel, '--sae', sae, '--prompt', kPrompt,
                                        '--top', String(kTop), '--threads', '1'], {encoding: 'utf8'})
      .trimEnd().split('\n').map((l) => l.split('\t').map(Number)).filter(([p]) => p === T - 1).map(([, f, a]) => [f, a]);
  // The graph the page asks its engine for: pruned at node 0.99 and edge 0.98, at most 1,000
  // features (worker-graph.js), of transcoders converted to Q8_0 as the page converts them.
  writeTranscoders(path.join(kDir, 'tc'), plain.config.n_embd, plain.config.n_layer);
  const tc = path.join(kDir, 'tc-q8_0.gguf');
  execFileSync(path.join(kNative, 'gpt2-convert'), ['--transcoders', path.join(kDir, 'tc'), '--output', tc, '--type', 'q8_0',
                                                    '--quiet'], {stdio: 'pipe'});
  const graphJson = path.join(kDir, 'graph.json');
  execFileSync(kGpt2, ['graph', '--model', kModel, '--transcoders', tc, '--prompt', kPrompt, '--threads', '1',
                       '--node-threshold', '0.99', '--edge-threshold', '0.98', '--max-feature-nodes', '1000',
                       '--json', graphJson], {stdio: 'pipe'});
  // Block 0's dashboards over a small corpus served beside the model, windows of 16 tokens.
  fs.copyFileSync(path.join(kRoot, 'tests/data/dashboard/corpus.txt'), path.join(kDir, 'corpus.txt'));
  const dashboardJson = path.join(kDir, 'dashboard.json');
  execFileSync(kGpt2, ['dashboard', '--model', kModel, '--transcoders', tc, '--corpus', path.join(kDir, 'corpus.txt'),
                       '--blocks', '0', '--context', '16', '--threads', '1', '--activations', 'int8', '--json', dashboardJson], {stdio: 'pipe'});
  return {plain, T, sae, features, ids: nativeGenerate(kModel, kPrompt, kSampling, 1),
          graph: JSON.parse(fs.readFileSync(graphJson, 'utf8')),
          dashboard: parseDashboardText(fs.readFileSync(dashboardJson, 'utf8'))};
}

const ref = skip ? null : references();
const idsIn = {};  // browser -> sampled ids

for (const kind of kBrowsers) {
  describe(`the core suite in ${kind}`, {skip, timeout: 240_000}, () => {
    let server, browser, page;
    const consoleLines = [];

    // Throws the page's error message, if it shows one.
    async function noPageError() {
      const text = await page.evaluate(() => {
        const e = document.querySelector('[data-testid=error]');
        return e.hidden ? '' : e.textContent;
      });
      if (text) throw new Error(`page error: ${text}\n${consoleLines.join('\n')}`);
    }

    // Waits until fn(arg) holds in the page or it shows an error.
    async function until(fn, arg) {
      try {
        await page.waitFor(new Function('arg', `return (${fn})(arg) || !document.querySelector('[data-testid=error]').hidden;`),
                           arg, kTimeout);
      } catch (e) {
        // What the page was doing when it stopped, and what it logged: a wait that runs out says
        // nothing else (a page that never loaded in Firefox, once in 20 runs).
        const status = await Promise.race([
          page.evaluate(() => ['progress', 'status', 'stats', 'error'].map((id) => {
            const el = document.querySelector(`[data-testid=${id}]`);
            return `${id}: ${el ? JSON.stringify({text: el.textContent.trim().slice(0, 200), ...el.dataset}) : '-'}`;
          }).join('\n')),
          new Promise((resolve) => setTimeout(() => resolve('(the page did not answer in 5 s)'), 5000))]);
        throw new Error(`${e.message}\n${status}\n${consoleLines.join('\n')}`);
      }
      await noPageError();
    }

    async function openPage(query) {
      const p = await browser.newPage();
      p.watch(consoleLines);
      await p.goto(`${server.url}?model=models/gpt2-tiny-q8_0.gguf&debug=1${query}`);
      return p;
    }

    async function waitLoaded() {
      await until(() => document.querySelector('[data-testid=progress]').dataset.source);
    }

    async function generate(maxTokens = kSampling.maxTokens) {
      for (const [id, v] of [['temperature', kSampling.temperature], ['top-k', kSampling.topK],
                             ['top-p', kSampling.topP], ['seed', kSampling.seed], ['max-tokens', maxTokens]]) {
        await page.fill(id, v);
      }
      await page.fill('prompt', kPrompt);
      await page.evaluate(() => { delete document.querySelector('[data-testid=stats]').dataset.reason; });
      await page.click('[data-testid=generate]');
      await until(() => document.querySelector('[data-testid=stats]').dataset.reason);
      return (await page.text('[data-testid=output-ids]')).trim().split(/\s+/).map(Number);
    }

    before(async () => {
      server = await serveSite({site: kSite, models: kDir, isolate: true});
      browser = await launch(kind);
    });

    after(async () => {
      await page?.close();
      await browser?.close();
      await server?.close();
      if (consoleLines.length) console.log(`${kind}:\n${consoleLines.join('\n')}`);
    });

    test(`loads the offline model with ${kThreads} threads and samples the native CLI's ids for a seed`, async (t) => {
      page = await openPage(`&threads=${kThreads}`);
      await waitLoaded();
      t.diagnostic(await page.evaluate(() => navigator.userAgent));
      assert.equal(await page.attr('[data-testid=progress]', 'data-source'), 'network');
      assert.ok((await page.text('[data-testid=model-name]')).trim(), 'the model is named');
      // The int8 multiply the engine's probe picked for prompts: one this build can run (the
      // emulated byte dots and the widened path are only ever forced by the tests).
      assert.match(await page.text('#model-info'),
                   /Int8 prompt products(int16 pairs|relaxed 4-byte dot, b (un)?signed)Threads/);
      const ids = await generate();
      assert.deepEqual(ids, ref.ids, '`gpt2 generate --seed 1` with the same settings');
      assert.equal(await page.evaluate(() => self.crossOriginIsolated), true);
      assert.equal(await page.attr('[data-testid=stats]', 'data-threads'), String(kThreads));
      const stats = await page.text('[data-testid=stats]');
      assert.match(stats, new RegExp(`${kThreads} threads \\(cross-origin isolated\\)`));
      t.diagnostic(stats);
    });

    test('every view draws and every panel runs its job', async () => {
      const {T} = ref;
      await until((n) => document.querySelectorAll('[data-testid=tokens] .chip').length === n &&
                         document.querySelector('[data-testid=logit-lens] .lens-cell') &&
                         document.querySelector('[data-testid=probs] li'), T + kSampling.maxTokens);
      // The Anatomy is folded away: open it.
      await page.click('details.anatomy summary');
      // Each job, started by its button, leaves its result in the page's state. The patching
      // panels' prompts: the same length, another next token on this model.
      await page.select('heads-source', 'prompt');
      await page.fill('patch-clean', 'The license is granted to you');
      await page.fill('patch-corrupted', 'The license is granted to me');
      for (const [button, done] of [
        ['heads-run', () => window.gpt2Page.state.heads.result],
        ['quant-run', () => window.gpt2Page.state.quant.result],
        ['attr-run', () => window.gpt2Page.state.attribution],
        ['sweep-run', () => window.gpt2Page.state.sweep.result && !window.gpt2Page.state.sweep.running],
        ['patch-run', () => window.gpt2Page.state.patching.result && !window.gpt2Page.state.patching.running],
        ['path-patch-run', () => window.gpt2Page.state.pathPatch.result && !window.gpt2Page.state.pathPatch.running],
        ['atp-run', () => window.gpt2Page.state.atp],
      ]) {
        await page.waitFor((b) => !document.querySelector(`[data-testid=${b}]`).disabled, button, kTimeout);
        await page.click(`[data-testid=${button}]`);
        await until(done);
      }
      // Every view has drawn something: elements, text, or a canvas with a pixel painted. The
      // last job's reply is in the state; the store draws it at the next frame (which a headless
      // browser may hold back), so draw now.
      await page.evaluate(() => window.gpt2Page.flush());
      const empty = await page.evaluate((ids) => ids.filter((id) => {
        const e = document.querySelector(`[data-testid=${id}]`) || document.getElementById(id);
        if (!e) return true;
        if (e instanceof HTMLCanvasElement) {
          const pixels = e.getContext('2d').getImageData(0, 0, e.width, e.height).data;
          for (let i = 3; i < pixels.length; i += 4) if (pixels[i]) return false;
          return true;
        }
        return !e.textContent.trim() && !e.querySelector('canvas, svg, img');
      }), ['tokens', 'output', 'attention-grid', 'attention-big', 'residual', 'layernorm', 'mlp', 'probs',
           'logit-lens', 'anatomy', 'model-info', 'exp-diagram', 'heads', 'quant', 'attribution', 'sweep', 'patching',
           'path-patch-grid', 'atp', 'atp-heads']);
      assert.deepEqual(empty, [], 'views with nothing drawn');
      await page.screenshot(artifact(`browsers-${kind}.png`));
    });

    test('saliency equals gpt2 saliency', async () => {
      const {T} = ref;
      await page.evaluate(() => window.gpt2Page.set({saliency: null}));
      await page.select('saliency-method', 'grad');
      await page.waitFor(() => !document.querySelector('[data-testid=saliency-run]').disabled, null, kTimeout);
      await page.click('[data-testid=saliency-run]');
      await until(() => window.gpt2Page.state.saliency);
      const s = await page.evaluate(() => {
        const x = window.gpt2Page.state.saliency;
        return {values: Array.from(x.values), total: x.total, position: x.position, target: x.target};
      });
      assert.equal(s.position, T - 1);
      const lines = execFileSync(kGpt2, ['saliency', '--model', kModel, '--prompt', kPrompt, '--threads', '1',
                                         '--activations', 'int8', '--target', String(s.target)], {encoding: 'utf8'})
          .trimEnd().split('\n').map((l) => Number(l.split('\t')[1]));
      const scale = Math.max(1e-6, ...lines.slice(0, T).map(Math.abs));
      for (let p = 0; p < T; ++p) closeTo(s.values[p] / scale, lines[p] / scale, 2e-3, `value at ${p}`);
      closeTo(s.total / scale, lines[T] / scale, 2e-3, 'total');
      await until((n) => document.querySelectorAll('[data-testid=saliency] .chip').length === n, s.values.length);
    });

    test('a sparse autoencoder: its features equal gpt2 features, steering equals generate --steer', async () => {
      const {T, features, sae} = ref;
      await page.fill('sae-url', 'models/sae');
      await page.click('[data-testid=sae-load-url]');
      await until(() => /ready/.test(document.querySelector('[data-testid=sae-status]').textContent));
      await page.click(`[data-testid=tokens] .chip[data-position="${T - 1}"]`);
      await until((p) => window.gpt2Page.state.saeFeatures?.position === p &&
                         document.querySelector('[data-testid=sae-explained]'), T - 1);
      const shown = await page.evaluate(() => Array.from(document.querySelectorAll('[data-testid=sae-features] button[data-feature]'),
                                                         (b) => [Number(b.dataset.feature), Number(b.dataset.activation)]));
      assert.deepEqual(shown.map(([f]) => f), features.map(([f]) => f), 'the features, in order');
      shown.forEach(([f, a], i) => closeTo(a, features[i][1], 2e-3, `feature ${f}`));
      const f = features[0][0];
      await page.fill('sae-edit-feature', f);
      await page.select('sae-edit-mode', 'steer');
      await page.fill('sae-edit-value', 8);
      await page.click('[data-testid=sae-edit-add]');
      const steered = await generate();
      assert.deepEqual(steered, nativeGenerate(kModel, kPrompt, kSampling, 1, ['--sae', sae, '--steer', `${f}:8`]));
      assert.notDeepEqual(steered, ref.ids, 'the steering changes the text');
      // Steering off again, for the tests after this one.
      const sae0 = await page.evaluate(() => window.gpt2Page.state.saes[0].id);
      await page.click(`[data-testid=sae-edits] button[data-remove="${sae0}:${f}:steer"]`);
      await until(() => !document.querySelector('[data-testid=sae-edits] button[data-remove]'));
    });

    test('an attribution graph: transcoders from a folder URL, the computed graph equals gpt2 graph --json', async () => {
      const want = ref.graph;
      await page.fill('graph-transcoders-url', 'models/tc');
      await page.click('[data-testid=graph-transcoders-load-url]');
      await until((n) => window.gpt2Page.state.graphTranscoders.blocks.length === n, ref.plain.config.n_layer);
      await page.fill('graph-prompt', kPrompt);
      await page.click('[data-testid=graph-compute]');
      await until(() => window.gpt2Page.state.graphComputed || window.gpt2Page.state.graphError);
      assert.equal(await page.evaluate(() => window.gpt2Page.state.graphError), '');
      const got = JSON.parse(await page.evaluate(() => window.gpt2Page.state.graph.text));
      assert.deepEqual(got.nodes.map((n) => n.node_id), want.nodes.map((n) => n.node_id), 'the same nodes');
      want.nodes.forEach((n, i) => {
        for (const k of ['activation', 'influence']) {
          if (n[k] === null) assert.equal(got.nodes[i][k], null);
          else closeTo(got.nodes[i][k], n[k], 2e-3, `${n.node_id} ${k}`);
        }
      });
      assert.deepEqual(got.links.map((l) => `${l.source}>${l.target}`), want.links.map((l) => `${l.source}>${l.target}`));
      want.links.forEach((l, k) => closeTo(got.links[k].weight, l.weight, 2e-3, `link ${k}`));
    });

    test('feature dashboards: block 0 of the transcoders over a corpus URL equal gpt2 dashboard --json; a Neuronpedia ' +
         'export opens in the same view', async () => {
      const want = ref.dashboard;
      await page.select('dashboard-dictionary', 'transcoders');
      await page.select('dashboard-scope', 'block');
      await page.fill('dashboard-block', 0);
      await page.select('dashboard-corpus', 'url');
      await page.fill('dashboard-corpus-url', 'models/corpus.txt');
      await page.fill('dashboard-context', 16);
      await page.fill('dashboard-top-count', 20);
      await page.fill('dashboard-per-band', 5);
      await page.click('[data-testid=dashboard-compute]');
      await until(() => window.gpt2Page.state.dashboards?.source.startsWith('the engine') || window.gpt2Page.state.dashboardError);
      assert.equal(await page.evaluate(() => window.gpt2Page.state.dashboardError), '');
      // The file the page holds (and exports), and the index it reads each feature through.
      const held = () => page.evaluate(async () => {
        const d = window.gpt2Page.state.dashboards;
        const text = await d.file.text();
        const bytes = new Uint8Array(await d.file.arrayBuffer());
        const decoder = new TextDecoder();
        return {text, metadata: d.metadata,
                entries: d.features.map((f) => ({layer: f.layer, index: f.index,
                                                 object: JSON.parse(decoder.decode(bytes.subarray(f.at[0], f.at[1])))}))};
      });
      const file = await held();
      const got = JSON.parse(file.text);
      assert.deepEqual(file.metadata, want.metadata);
      assert.deepEqual(file.entries.map((e) => [e.layer, e.index]), got.features.map((f) => [f.layer, f.index]));
      file.entries.forEach((e, i) => assert.deepEqual(e.object, got.features[i], `feature ${i}'s bytes in the index`));
      assert.deepEqual(got.metadata, want.metadata);
      assert.deepEqual(got.features.map((f) => [f.layer, f.index]), want.features.map((f) => [f.layer, f.index]));
      want.features.forEach((f, i) => {
        const g = got.features[i];
        const at = `feature ${f.layer}_${f.index}`;
        // Q8_0 weights with int8 activations: an activation rounded the other way natively moves a
        // value by up to a percent (F32 equality: dashboard-embind.test.mjs), so the windows are
        // compared where such a move cannot reorder them: the top windows.
        closeTo(g.maxActApprox, f.maxActApprox, 2e-2, `${at} max`);
        closeTo(g.frac_nonzero, f.frac_nonzero, 0.01, `${at} frac_nonzero`);
        assert.deepEqual(g.pos_str, f.pos_str, `${at} promoted tokens`);
        const top = (d) => d.activations.filter((w) => w.binMin === -1);
        assert.deepEqual(top(g).map((w) => [w.dataIndex, w.tokens.join('')]), top(f).map((w) => [w.dataIndex, w.tokens.join('')]),
                         `${at}: the same top windows`);
        top(f).forEach((w, j) => w.values.forEach((v, t) =>
          closeTo(top(g)[j].values[t], v, 2e-2, `${at} window ${j} token ${t}`)));
      });
      // The picked feature is drawn: its top windows, each token shaded with its value.
      const top = want.features.find((f) => f.activations.length);
      await page.select('dashboard-pick', String(want.features.indexOf(top)));
      await until((n) => document.querySelectorAll('[data-testid=dashboard-top] [data-testid=dashboard-window]').length === n,
                  top.activations.filter((w) => w.binMin === -1).length);
      // Neuronpedia's export of a feature (its keys, its source id for the layer, a label) opens too.
      const neuronpedia = {modelId: 'gpt2-small', layer: '0-res-jb', index: '7', maxActApprox: 2.5, frac_nonzero: 0.01,
                           pos_str: [' the'], pos_values: [0.5], neg_str: [' a'], neg_values: [-0.4],
                           freq_hist_data_bar_heights: [3, 1], freq_hist_data_bar_values: [0.6, 1.9],
                           explanations: [{description: 'the word "the"'}],
                           activations: [{tokens: [' the', ' cat'], values: [2.5, 0], maxValue: 2.5, maxValueTokenIndex: 0,
                                          binMin: -1, binMax: -1, binContains: 9, dataIndex: 12}]};
      await page.evaluate((text) => {
        const input = document.querySelector('[data-testid=dashboard-file]');
        const t = new DataTransfer();
        t.items.add(new File([text], 'neuronpedia-0-res-jb.jsonl'));
        input.files = t.files;
        input.dispatchEvent(new Event('change', {bubbles: true}));
      }, JSON.stringify(neuronpedia));
      await until(() => document.querySelector('[data-testid=dashboard]')?.dataset.index === '7');
      assert.match(await page.text('[data-testid=dashboard] h4'), /Block 0, feature #7: the word "the"/);
      assert.equal(await page.count('[data-testid=dashboard-top] [data-testid=dashboard-window]'), 1);
      // The same request again is read from the browser cache, the same file.
      await page.click('[data-testid=dashboard-compute]');
      await until(() => window.gpt2Page.state.dashboards?.source.startsWith('the browser cache') ||
                         window.gpt2Page.state.dashboardError);
      const cached = await held();
      assert.equal(cached.text, file.text);
      assert.deepEqual(cached.entries, file.entries);
    });

    // After saliency and the SAE: until every request carries the store's interventions (issue
    // 35), a probe run after the experiment's Reset still runs under its skipped MLP.
    test('an experiment: skip the chosen block\'s MLP, run again; before and after equal gpt2 inspect', async () => {
      const {plain, T} = ref;
      // Pick the prompt's last token, as the CLI's last position.
      await page.click(`[data-testid=tokens] .chip[data-position="${T - 1}"]`);
      await until((p) => window.gpt2Page.state.picked === p, T - 1);
      const block = Number(await page.evaluate(() => document.querySelector('#layer-select').value));
      await page.check('exp-skip-mlp');
      await page.evaluate(() => { document.querySelector('[data-testid=exp-kl]').removeAttribute('data-kl'); });
      await page.click('[data-testid=exp-run-again]');
      await until(() => document.querySelector('[data-testid=exp-kl]').dataset.kl !== undefined);
      const changed = nativeInspect(kModel, kPrompt, ['--skip-mlp', String(block)]);
      const list = (id) => page.evaluate((s) => Array.from(document.querySelectorAll(`[data-testid=${s}] li`),
                                                            (li) => [Number(li.dataset.id), Number(li.dataset.prob)]), id);
      for (const [id, inspect] of [['exp-before', plain], ['exp-after', changed]]) {
        const shown = await list(id), fin = inspect.final[T - 1];
        assert.deepEqual(shown.slice(0, 3).map(([i]) => i), fin.top_ids.slice(0, 3), `${id}: the top 3`);
        shown.slice(0, 3).forEach(([, p], k) => closeTo(p, fin.top_probs[k], 2e-3, `${id}: top-${k} probability`));
      }
      const kl = klDivergence(inspectProbs(plain, T - 1), inspectProbs(changed, T - 1));
      assert.ok(kl > 1e-3, `skipping the MLP changes the prediction (KL ${kl})`);
      closeTo(await page.attr('[data-testid=exp-kl]', 'data-kl'), kl, 2e-3, 'KL(before || after)');
      await page.click('[data-testid=exp-reset]');
    });

    test('1 thread samples the same ids, for as many tokens as 2 threads', async () => {
      const long = await generate(kLong);
      assert.deepEqual(long.slice(0, kSampling.maxTokens), ref.ids);
      await page.close();
      page = await openPage('&threads=1');
      await waitLoaded();
      assert.deepEqual(await generate(kLong), long);
      assert.equal(await page.attr('[data-testid=stats]', 'data-threads'), '1');
      idsIn[kind] = long;
    });
  });
}

describe('both browsers', {skip: skip || (kBrowsers.length < 2 && 'GPT2_BROWSERS names one')}, () => {
  // Both run the relaxed SIMD twin here (and on Q8_0 weights the plain module's bits are the
  // same), so past the step where the native build parts too.
  test(`Chromium and Firefox sample the same ${kLong} ids for the same seed`, () => {
    assert.deepEqual(idsIn.firefox, idsIn.chromium);
  });
});
