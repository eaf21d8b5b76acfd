// What a seed reproduces, on the committed offline model (weights/gpt2-tiny-q8_0.gguf, Q8_0,
// int8 activations as the page runs them), as the README states it:
// - one build, the same settings and seed: the same tokens every time, whatever the threads;
// - across builds (native Highway, the page's wasm SIMD128 module and its relaxed SIMD twin, whose
//   f32 products are fused): the same tokens up to the first step whose choice a change of the
//   logits within rounding could flip. Float sums round differently per SIMD target, so the
//   builds' logits differ by up to kLogitRounding; a step is "within rounding" when its decision
//   margin (decide() below: the smallest change of every logit that could change its choice) is
//   at most that.
// The wasm modules run under Node (wasm-run.mjs, build/wasm/web/gpt2-engine-node.cjs); the page in
// Chromium and Firefox is browsers.test.mjs's. The sampler is re-derived here from its
// description in src/model/sampler.h (SplitMix64, top-k, top-p, the draw), independently of it.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {before, describe, test} from 'node:test';
import {kRoot} from './browser.mjs';
import {kNodeModule, kWork, nativeGenerate, nativeInspect} from './fixtures.mjs';

const kTiny = path.join(kRoot, 'weights/gpt2-tiny-q8_0.gguf');
const kDir = path.join(kWork, 'reproducible');
const kModel = path.join(kDir, 'gpt2-tiny-q8_0.gguf');  // a copy: nativeInspect writes beside it
const kN = 40;  // tokens per run, the page's default: the builds part after ~16 on its defaults
// How far two builds' log-probabilities of the same tokens lie apart. Their float parts
// (LayerNorm, GELU, softmax, the scales of the int8 products) round differently per SIMD target,
// by ~1e-6; with int8 activations such a difference now and then moves an activation across a
// quantization step, and the text's later positions move by up to 0.041 (measured: native
// AVX-512 against the wasm module, 6 texts of ~65 tokens, each position's 64 likeliest tokens;
// the last test measures one of them again). Twice that.
const kLogitRounding = 0.08;
const kFloat32Rows = 1e-5;  // what writing log-probabilities (~-10) as float32 rounds off

// The page's defaults, the same with top-p, and greedy.
const kCases = [
  {name: "the page's defaults", prompt: 'The meaning of life is',
   sampling: {temperature: 0.8, topK: 40, topP: 1, seed: 1}},
  {name: 'top-p', prompt: 'Permission is hereby granted', sampling: {temperature: 1, topK: 0, topP: 0.9, seed: 3}},
  {name: 'greedy', prompt: 'The Python documentation', sampling: {temperature: 0, topK: 0, topP: 1, seed: 0}},
];

const skip = (!fs.existsSync(kNodeModule) && 'build/wasm not built') ||
             (!fs.existsSync(kTiny) && 'weights/gpt2-tiny-q8_0.gguf missing') ||
             (!fs.existsSync(path.join(kRoot, 'build/native/gpt2')) && 'build/native not built');

// SplitMix64 (Steele, Lea, Flood 2014) as src/model/sampler.h states it: the draws in [0, 1).
function* draws(seed) {
  const kMask = (1n << 64n) - 1n;
  let state = BigInt.asUintN(64, BigInt(seed));
  for (;;) {
    state = (state + 0x9E3779B97F4A7C15n) & kMask;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xBF58476D1CE4E5B9n) & kMask;
    z = ((z ^ (z >> 27n)) * 0x94D049BB133111EBn) & kMask;
    z ^= z >> 31n;
    yield Number(z >> 11n) / 2 ** 53;
  }
}

// The tokens of `row` by rank, in the sampler's order (higher first, equal by lower id): r ->
// token. Ranks past the likeliest 256 sort the whole row, which a step rarely needs.
function ranked(row) {
  const byRank = (ids) => ids.sort((a, b) => row[b] - row[a] || a - b);
  const threshold = Float32Array.from(row).sort()[row.length - 256];
  let order = byRank(Array.from(row.keys()).filter((i) => row[i] >= threshold));
  return (r) => {
    if (r >= order.length && order.length < row.length) order = byRank(Array.from(row.keys()));
    return order[r];
  };
}

// One step of the sampler on log-probabilities `row` with the draw u: the token it picks, and
// its decision margin, a lower bound on the change of the logits (the same bound for each) that
// could change the pick. With every logit within eps of these, the ranks r and r + 1 cannot
// swap while (l_r - l_r+1) / 2 > eps, and the odds of a share of the probability mass (a set of
// tokens against the rest) move by at most a factor exp(2 eps / T); so the pick stands while
// eps is below each of: the half-gaps at the top-k cut, the top-p cut and either side of the
// picked rank; T/2 ln of the odds between the top-p threshold and the masses either side of its
// cut; T/2 ln of the odds between u and the picked token's interval ends.
export function decide(row, s, u) {
  const V = row.length;
  const id = ranked(row);
  const l = (r) => row[id(r)];
  const halfGap = (r) => (l(r) - l(r + 1)) / 2;
  if (s.temperature <= 0 || s.topK === 1) return {pick: id(0), margin: halfGap(0)};
  const T = s.temperature;
  const odds = (x) => x / (1 - x);
  const logOdds = (a, b) => (T / 2) * Math.log(odds(a) / odds(b));  // a > b
  const margins = [];
  const topK = s.topK > 0 && s.topK < V ? s.topK : V;
  const weight = (r) => Math.exp((l(r) - l(0)) / T);
  let total = 0;
  if (topK < V) {
    margins.push(halfGap(topK - 1));
    for (let r = 0; r < topK; ++r) total += weight(r);
  } else {
    for (const x of row) total += Math.exp((x - l(0)) / T);
  }
  let kept = topK;
  if (s.topP < 1) {
    let mass = 0;
    for (let r = 0; r < topK; ++r) {
      const before = mass;
      mass += weight(r) / total;
      if (mass >= s.topP) {
        kept = r + 1;
        if (r > 0) margins.push(logOdds(s.topP, before));
        if (kept < topK) margins.push(halfGap(r), logOdds(mass, s.topP));
        total *= mass;
        break;
      }
    }
  }
  const target = u * total;
  let r = 0, cumulative = weight(0);
  while (r < kept - 1 && !(cumulative > target)) cumulative += weight(++r);
  const a = (cumulative - weight(r)) / total, b = cumulative / total;
  if (r > 0) margins.push(halfGap(r - 1), logOdds(u, a));
  if (r < kept - 1) margins.push(halfGap(r), logOdds(b, u));
  return {pick: id(r), margin: Math.min(...margins)};
}

// The page's engine under Node: {ids, promptIds, simd, rows(p)} (wasm-run.mjs).
function wasmRun(variant, name, prompt, sampling, n) {
  const out = path.join(kDir, `${name}-${variant}`);
  execFileSync(process.execPath, [
    ...(variant === 'relaxed' ? ['--experimental-wasm-relaxed-simd'] : []),
    path.join(kRoot, 'tests/web/wasm-run.mjs'), kModel, variant, out, JSON.stringify({prompt, sampling, n})],
  {stdio: 'pipe'});
  const run = JSON.parse(fs.readFileSync(`${out}.json`, 'utf8'));
  const data = fs.readFileSync(`${out}.f32`);
  const all = new Float32Array(data.buffer, data.byteOffset, data.length / 4);
  run.rows = (p) => all.subarray(p * run.nVocab, (p + 1) * run.nVocab);
  return run;
}

// Each step's pick and decision margin re-derived from a build's own log-probabilities.
function decisions(run, sampling) {
  const us = draws(sampling.seed);
  return run.ids.map((id, i) => {
    const d = decide(run.rows(run.promptIds.length - 1 + i), sampling, us.next().value);
    // The build's pick is this sampler's, unless the step is a tie to float32 precision.
    assert.ok(d.pick === id || d.margin <= kFloat32Rows,
              `step ${i}: the sampler as documented picks ${d.pick}, the engine ${id} (margin ${d.margin})`);
    return d.margin;
  });
}

const firstDifference = (a, b) => {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; ++i) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
};

// The largest |difference| of log-probability over each row's `top` likeliest tokens (by `a`).
function maxDifference(rowsA, rowsB, positions, top = 64) {
  let max = 0;
  for (let p = 0; p < positions; ++p) {
    const a = rowsA(p), b = rowsB(p);
    const order = Array.from(a.keys()).sort((x, y) => a[y] - a[x]).slice(0, top);
    for (const i of order) max = Math.max(max, Math.abs(a[i] - b[i]));
  }
  return max;
}

describe('what a seed reproduces on the offline model', {skip}, () => {
  const runs = {};
  before(() => {
    fs.mkdirSync(kDir, {recursive: true});
    fs.copyFileSync(kTiny, kModel);
    for (const c of kCases) {
      runs[c.name] = {plain: wasmRun('plain', c.sampling.seed + '-' + c.sampling.temperature, c.prompt, c.sampling, kN),
                      relaxed: wasmRun('relaxed', c.sampling.seed + '-' + c.sampling.temperature, c.prompt, c.sampling, kN),
                      native: nativeGenerate(kModel, c.prompt, {...c.sampling, maxTokens: kN}, 1)};
    }
  });

  test('one build and seed give the same tokens every time, with 1 or 2 threads', () => {
    for (const c of kCases) {
      const s = {...c.sampling, maxTokens: kN};
      assert.deepEqual(nativeGenerate(kModel, c.prompt, s, 2), runs[c.name].native, `${c.name}: native, 2 threads`);
      assert.deepEqual(nativeGenerate(kModel, c.prompt, s, 1), runs[c.name].native, `${c.name}: native, again`);
      assert.equal(runs[c.name].relaxed.simd, 'wasm-relaxed-simd');
      assert.equal(runs[c.name].plain.simd, 'wasm-simd128');
    }
    const c = kCases[0];
    assert.deepEqual(wasmRun('plain', 'again', c.prompt, c.sampling, kN).ids, runs[c.name].plain.ids, 'wasm, again');
  });

  test('across builds the tokens agree up to the first step decided within rounding', (t) => {
    for (const c of kCases) {
      const {native, plain, relaxed} = runs[c.name];
      const margins = {plain: decisions(plain, c.sampling), relaxed: decisions(relaxed, c.sampling)};
      // Where two builds part, they had the same tokens before: the step's margin, from the
      // build whose margins are at hand, is the same choice on the same input.
      for (const [a, b, marginsOf] of [['native', 'plain', 'plain'], ['native', 'relaxed', 'relaxed'],
                                       ['plain', 'relaxed', 'plain']]) {
        const ids = {native, plain: plain.ids, relaxed: relaxed.ids};
        const s = firstDifference(ids[a], ids[b]);
        const near = margins[marginsOf].findIndex((m) => m <= kLogitRounding);
        const at = s < 0 ? 'none' : `${s} (margin ${margins[marginsOf][s].toExponential(2)})`;
        t.diagnostic(`${c.name}: ${a} and ${b} part at step ${at}; the first step within ` +
                     `rounding is ${near < 0 ? 'none' : `${near} (margin ${margins[marginsOf][near].toExponential(2)})`}`);
        if (s < 0) continue;
        assert.ok(margins[marginsOf][s] <= kLogitRounding,
                  `${c.name}: ${a} and ${b} part at step ${s}, whose decision margin ` +
                  `${margins[marginsOf][s]} is more than the rounding ${kLogitRounding}`);
      }
    }
  });

  test('kLogitRounding bounds the builds\' differences of log-probabilities on the same tokens', (t) => {
    // The page's defaults run, as a text: each build prefills it and every position is compared.
    const c = kCases[0];
    const text = execFileSync(path.join(kRoot, 'build/native/gpt2'), [
      'generate', '--model', kModel, '--prompt', c.prompt, '--n', '40', '--temp', String(c.sampling.temperature),
      '--top-k', String(c.sampling.topK), '--seed', String(c.sampling.seed), '--threads', '1', '--activations', 'int8'],
    {encoding: 'utf8'}).trimEnd();
    const inspect = nativeInspect(kModel, text);
    const V = inspect.config.n_vocab, P = inspect.ids.length;
    const logits = inspect.tensors.find((x) => x.name === 'logits').data;
    const nativeRows = (p) => {
      const row = logits.slice(p * V, (p + 1) * V);
      const max = Math.max(...row);
      const lse = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0));
      return Float64Array.from(row, (x) => x - lse);
    };
    const plain = wasmRun('plain', 'text', text, c.sampling, 0);
    const relaxed = wasmRun('relaxed', 'text', text, c.sampling, 0);
    assert.deepEqual(plain.promptIds, inspect.ids);
    const measured = {
      'native/plain': maxDifference(nativeRows, plain.rows, P),
      'native/relaxed': maxDifference(nativeRows, relaxed.rows, P),
      'plain/relaxed': maxDifference(plain.rows, relaxed.rows, P),
    };
    t.diagnostic(`largest difference on ${P} positions: ${JSON.stringify(measured)}`);
    for (const [pair, d] of Object.entries(measured)) {
      assert.ok(d <= kLogitRounding, `${pair}: ${d} > kLogitRounding ${kLogitRounding}`);
    }
    // Not a bound that says nothing: the builds do differ.
    assert.ok(measured['native/relaxed'] > 0);
  });
});
