#!/usr/bin/env node
// Issue 51's peer: ONNX Runtime Web (npm onnxruntime-web, its wasm backend: what transformers.js
// runs) against ours, in headless Chromium, on the same GPT-2-small-shaped random weights.
//
//   node scripts/bench-ort.mjs [--runs 5] [--threads 1,2] [--prompt-tokens 128]
//                              [--decode-tokens 32] [--kl-prompts 20] [--skip-kl] [--plain]
//
// The models: ours, benchModel('gpt2', 'q8_0' | 'f32') (scripts/node-engine.mjs); the peer's,
// the F32 one exported by scripts/export_onnx.py (made on demand into build/ort/, again when the
// GGUF or the script is newer; needs /usr/bin/python3 with python3-torch and python3-onnx):
// fp32, and int8 as ONNX Runtime's dynamic quantizer makes it (MatMulInteger, per-channel int8
// weights, per-tensor u8 activations; transformers.js's "q8").
//
// Speed: for each thread count and each pair (our Q8_0 against its int8, our F32 against its
// fp32), one fresh cross-origin isolated page (threads need it; both engines run on the page's
// main thread, as scripts/bench.mjs runs ours and wllama) holds both engines: ours is the page's
// own module choice (gpt2-engine.js for 1 thread, gpt2-engine-mt.js for more, each its relaxed
// SIMD twin where Chromium has relaxed SIMD, as web/worker/relaxed-simd.js picks), the peer
// ort.wasm.min.mjs with env.wasm.numThreads set. --plain: ours runs its plain SIMD128 module
// instead, as in browsers without relaxed SIMD (issue 51's second row). After one warm-up run each, --runs rounds, each
// a run of both (who goes first alternates): a prefill of the prompt's first --prompt-tokens
// tokens, then --decode-tokens greedy steps fed back (the peer's as transformers.js decodes: its
// graph takes the past keys and values and returns them with this step's appended). Figures are
// medians; ratios are the median of each round's ours / theirs.
//
// Accuracy (1 thread): for --kl-prompts prompts, each engine's last-position next-token
// distribution from its quantized model and from its f32 one; KL(f32 || quantized) in nats, so
// each engine is judged against its own f32 (our Q8_0 against our F32, its int8 against its
// fp32). Also KL(our F32 || its fp32), which checks that both run the same weights (it should be
// at float rounding's level).
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import * as H from '../tests/web/wllama-harness.mjs';
import * as Ours from './bench-ours.mjs';
import { arg, benchModel, cpuKind } from './node-engine.mjs';

const kRoot = H.repoRoot;
const kRuns = Number(arg('runs', '5'));
const kThreads = arg('threads', '1,2').split(',').map(Number);
const kPromptTokens = Number(arg('prompt-tokens', '128'));
const kDecodeTokens = Number(arg('decode-tokens', '32'));
const kKlPrompts = Number(arg('kl-prompts', '20'));
const kSkipKl = process.argv.includes('--skip-kl');
const kPlain = process.argv.includes('--plain');
const kOrtVersion = JSON.parse(fs.readFileSync(
  path.join(kRoot, 'node_modules/onnxruntime-web/package.json'), 'utf8')).version;
const kPairs = [
  { ours: 'q8_0', theirs: 'int8', what: 'our Q8_0 / its int8' },
  { ours: 'f32', theirs: 'fp32', what: 'our F32 / its fp32' },
];

// ---- the peer's models ------------------------------------------------------------------------

// build/ort/gpt2-{fp32,int8}.onnx from the F32 bench model, remade when older than it or the
// exporter.
function onnxModels(gguf) {
  const dir = path.join(kRoot, 'build/ort');
  const files = { fp32: path.join(dir, 'gpt2-fp32.onnx'), int8: path.join(dir, 'gpt2-int8.onnx') };
  const script = path.join(kRoot, 'scripts/export_onnx.py');
  const newest = Math.max(fs.statSync(gguf).mtimeMs, fs.statSync(script).mtimeMs);
  if (Object.values(files).some((f) => !fs.existsSync(f) || fs.statSync(f).mtimeMs < newest)) {
    if (spawnSync('/usr/bin/python3', ['-c', 'import torch, onnx'], { stdio: 'ignore' }).status !== 0) {
      console.error('bench-ort: exporting the ONNX models needs /usr/bin/python3 with torch and onnx: ' +
        'apt-get install -y python3-torch python3-onnx');
      process.exit(1);
    }
    console.log(`exporting ${path.relative(kRoot, gguf)} to ONNX (scripts/export_onnx.py)…`);
    execFileSync('/usr/bin/python3', [script, '--gguf', gguf, '--fp32', files.fp32, '--int8', files.int8],
      { stdio: 'inherit' });
  }
  return files;
}

// ---- in the page (serialized by page.evaluate: no closures) ----------------------------------

// One ONNX Runtime Web session of modelUrl on `threads` threads, on window.peer.
async function ortLoad({ modelUrl, threads }) {
  const ort = await import('/node_modules/onnxruntime-web/dist/ort.wasm.min.mjs');
  ort.env.wasm.wasmPaths = '/node_modules/onnxruntime-web/dist/';
  ort.env.wasm.numThreads = threads;
  const bytes = new Uint8Array(await (await fetch(modelUrl)).arrayBuffer());
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'] });
  const pastNames = session.inputNames.filter((n) => n.startsWith('past_key_values.'));
  window.peer = { ort, session, pastNames };
  return { inputs: session.inputNames.length };
}

// The peer's forward (GPT-2 small's 12 heads of 64), argmax and a float array as base64, on
// window for the functions below.
function ortHelpers() {
  const kHeads = 12, kHeadDim = 64;
  window.peerForward = async (ids, past) => {
    const { ort, session, pastNames } = window.peer;
    const feeds = { input_ids: new ort.Tensor('int64', BigInt64Array.from(ids, BigInt), [1, ids.length]) };
    pastNames.forEach((name, i) => {
      feeds[name] = past ? past[i] : new ort.Tensor('float32', new Float32Array(0), [1, kHeads, 0, kHeadDim]);
    });
    const out = await session.run(feeds);
    return { logits: out.logits.data, past: pastNames.map((n) => out[n.replace('past_key_values.', 'present.')]) };
  };
  window.argmax = (xs) => {
    let best = 0;
    for (let i = 1; i < xs.length; ++i) if (xs[i] > xs[best]) best = i;
    return best;
  };
  window.floatsBase64 = (xs) => {
    const bytes = new Uint8Array(Float32Array.from(xs).buffer);
    let s = '';
    for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    return btoa(s);
  };
}

// The peer: prefill the first n prompt tokens, then nDecode greedy steps fed back.
async function ortRun({ n, nDecode }) {
  const ids = window.bench.ids.slice(0, n);
  const t0 = performance.now();
  let r = await window.peerForward(ids);
  const t1 = performance.now();
  for (let i = 0; i < nDecode; ++i) r = await window.peerForward([window.argmax(r.logits)], r.past);
  return { prefillMs: t1 - t0, decodeMs: performance.now() - t1 };
}

// The last position's distribution of each text: ours (probabilities, from the capture's final
// stream) and the peer's (logits), as base64 float32, over the same token ids (our tokenizer's).
async function lastDistributions({ texts }) {
  const engine = window.bench.engines[0];
  const out = [];
  for (const text of texts) {
    const ids = Array.from(engine.tokenize(text));
    engine.reset();
    engine.setCapture(true);
    engine.prefill(ids);
    const ours = window.floatsBase64(engine.finalProbs(ids.length - 1));
    engine.setCapture(false);
    engine.reset();
    const theirs = window.floatsBase64((await window.peerForward(ids)).logits);
    out.push({ tokens: ids.length, ours, theirs });
  }
  return out;
}

// ---- in Node --------------------------------------------------------------------------------

const floats = (b64) => new Float32Array(new Uint8Array(Buffer.from(b64, 'base64')).buffer);

function softmax(logits) {
  let max = -Infinity;
  for (const x of logits) max = Math.max(max, x);
  let sum = 0;
  const p = new Float64Array(logits.length);
  for (let i = 0; i < logits.length; ++i) sum += (p[i] = Math.exp(logits[i] - max));
  for (let i = 0; i < p.length; ++i) p[i] /= sum;
  return p;
}

// Our probabilities in float64 summing to 1 (in float32 they miss it by rounding, which alone
// would make KL(p || p') of two near-equal distributions come out negative).
function normalized(probs) {
  const p = Float64Array.from(probs);
  const sum = p.reduce((a, b) => a + b, 0);
  return p.map((x) => x / sum);
}

// KL(p || q) in nats, over the tokens p gives mass; q's zeros (float underflow) floored.
function kl(p, q) {
  let d = 0;
  for (let i = 0; i < p.length; ++i) if (p[i] > 0) d += p[i] * (Math.log(p[i]) - Math.log(Math.max(q[i], 1e-45)));
  return d;
}

// 20 prompts of ordinary English, 8 to 40 tokens.
const kKlTexts = [
  'The quick brown fox jumps over the lazy dog.',
  'In the beginning the universe was created. This has made a lot of people very angry',
  'She opened the door and saw that the garden had been covered in snow during the night.',
  'To install the package, run the following command in your terminal and wait for it to finish:',
  'The capital of France is Paris, and the capital of Germany is',
  'Once upon a time, in a small village by the sea, there lived an old fisherman who',
  'def fibonacci(n):\n    if n < 2:\n        return n\n    return',
  'The results of the experiment suggest that the new method is faster than the old one, but',
  'He looked at the clock on the wall. It was already half past eleven, and the train',
  'Water boils at 100 degrees Celsius at sea level, but at higher altitudes it',
  'The committee will meet on Tuesday to discuss the budget for the next fiscal year.',
  'My favourite books are the ones that make me think about the world in a different way.',
  'Neural networks learn by adjusting their weights to reduce the error on the training data,',
  'The museum is open every day except Monday, from ten in the morning until six in the evening.',
  'After the storm passed, the villagers came out of their houses to see what was left of the',
  'Please remember to bring your passport, your tickets and a pen to fill in the form.',
  'The stock market fell sharply on Friday after the central bank raised interest rates again.',
  'A prime number is a natural number greater than one that has no divisors other than one and',
  'They walked along the river for hours, talking about everything and nothing, until the sun',
  'The recipe calls for two cups of flour, one cup of sugar, three eggs and a pinch of salt.',
];

const median = Ours.median;
const perSecond = (n, ms) => n / (ms / 1000);

async function comparePair(browser, origin, pair, threads, promptText) {
  const page = await browser.context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  const inPage = async (fn, a) => {
    try {
      return await page.evaluate(fn, a);
    } catch (e) {
      throw new Error(`${e.message}\n${errors.join('\n')}`);
    }
  };
  try {
    await page.goto(origin + '/');
    const engineUrl = threads === 1 ? '/build/wasm/web/gpt2-engine.js' : '/build/wasm/web/gpt2-engine-mt.js';
    const ours = await inPage(Ours.loadEngines, { engineUrl, modelUrl: `/__model/${pair.ours}.gguf`, promptText,
      threads: [threads], ...(threads > 1 ? { poolSize: threads - 1 } : {}), ...(kPlain ? { wasmSuffix: '' } : {}) });
    if (!ours.isolated) throw new Error('the page is not cross-origin isolated');
    if (ours.tokens < kPromptTokens) throw new Error(`prompt has ${ours.tokens} tokens, wanted ${kPromptTokens}`);
    await inPage(ortHelpers, {});
    await inPage(ortLoad, { modelUrl: `/__onnx/${pair.theirs}.onnx`, threads });
    const args = { k: 0, n: kPromptTokens, nDecode: kDecodeTokens, capture: false };
    await inPage(Ours.benchRun, args);  // warm-up: V8 tiers our hot functions up
    await inPage(ortRun, args);
    const rounds = [];
    for (let r = 0; r < kRuns; ++r) {
      const round = {};
      for (const side of r % 2 ? ['theirs', 'ours'] : ['ours', 'theirs']) {
        const t = await inPage(side === 'ours' ? Ours.benchRun : ortRun, args);
        round[side] = { prefill: perSecond(kPromptTokens, t.prefillMs), decode: perSecond(kDecodeTokens, t.decodeMs) };
      }
      rounds.push(round);
      console.log(`  ${pair.what} ${threads}T round ${r + 1}: prefill ${round.ours.prefill.toFixed(1)} / ` +
        `${round.theirs.prefill.toFixed(1)}, decode ${round.ours.decode.toFixed(1)} / ${round.theirs.decode.toFixed(1)} tok/s; ` +
        `load ${os.loadavg()[0].toFixed(2)}`);
    }
    const distributions = threads === 1 && !kSkipKl ?
      await inPage(lastDistributions, { texts: kKlTexts.slice(0, kKlPrompts) }) : null;
    await inPage(() => window.bench.engines.forEach((e) => e.delete()), {});
    const m = (side, key) => median(rounds.map((x) => x[side][key]));
    return {
      pair, threads, userAgent: ours.userAgent, relaxed: ours.relaxed, relaxedError: ours.relaxedError,
      int8Prefill: ours.info.int8_prefill, simd: ours.info.simd, rounds,
      ours: { prefill: m('ours', 'prefill'), decode: m('ours', 'decode') },
      theirs: { prefill: m('theirs', 'prefill'), decode: m('theirs', 'decode') },
      prefillRatio: median(rounds.map((x) => x.ours.prefill / x.theirs.prefill)),
      decodeRatio: median(rounds.map((x) => x.ours.decode / x.theirs.decode)),
      distributions,
    };
  } finally {
    await page.close();
  }
}

// ---- the run ----------------------------------------------------------------------------------

const needed = ['build/wasm/web/gpt2-engine.js', 'build/native/gpt2-make-model'];
if (kThreads.some((t) => t > 1)) needed.push('build/wasm/web/gpt2-engine-mt.js');
for (const f of needed) {
  if (!fs.existsSync(path.join(kRoot, f))) {
    console.error(`bench-ort: ${f} is missing; run: bash scripts/build.sh`);
    process.exit(1);
  }
}
const started = Date.now();
const cpu = cpuKind();
const date = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
const loadStart = os.loadavg();
console.log(`date ${date}\nmachine: ${cpu.kind} [${cpu.simd}], ${os.cpus().length} logical cores`);
console.log(`load average at start: ${loadStart.map((x) => x.toFixed(2)).join(' ')}`);

const ggufs = { q8_0: benchModel('gpt2', 'q8_0'), f32: benchModel('gpt2', 'f32') };
const onnx = onnxModels(ggufs.f32);
const served = {
  '/__model/q8_0.gguf': ggufs.q8_0, '/__model/f32.gguf': ggufs.f32,
  '/__onnx/fp32.onnx': onnx.fp32, '/__onnx/int8.onnx': onnx.int8,
};
const promptText = Ours.repeatedPrompt(kPromptTokens);
const { server, origin } = await H.startServer(served, { isolated: true });
const browser = await H.launchChromium();
const results = [];
try {
  for (const threads of kThreads) {
    for (const pair of kPairs) {
      console.log(`${pair.what}, ${threads} thread${threads > 1 ? 's' : ''}…`);
      results.push(await comparePair(browser, origin, pair, threads, promptText));
    }
  }
} finally {
  await browser.close();
  server.close();
}
const loadEnd = os.loadavg();

// ---- the tables -------------------------------------------------------------------------------

const f1 = (x) => x.toFixed(1);
const browserName = /(?:Headless)?Chrome\/[\d.]+/.exec(results[0].userAgent)?.[0] || results[0].userAgent;
const lines = [];
lines.push(`GPT-2 small shape, random weights (the same in both engines), prompt ${kPromptTokens} tokens, ` +
  `decode ${kDecodeTokens} greedy tokens; tokens/s, medians of ${kRuns} paired rounds; ratios: median of ` +
  'the rounds\' ours / theirs.');
lines.push(`${date}; ${cpu.kind} [${cpu.simd}], ${os.cpus().length} logical cores; ${browserName}; ` +
  `onnxruntime-web ${kOrtVersion}; load average at start ${loadStart[0].toFixed(2)}, at end ${loadEnd[0].toFixed(2)}.`);
lines.push('');
lines.push('| pair | threads | our module | ours prefill | its prefill | **prefill ours / its** | ' +
  'ours decode | its decode | **decode ours / its** |');
lines.push('|---|---:|---|---:|---:|---:|---:|---:|---:|');
for (const r of results) {
  const module = `${r.threads === 1 ? 'gpt2-engine' : 'gpt2-engine-mt'}${r.relaxed ? ' relaxed' : ' plain'}` +
    (r.pair.ours === 'q8_0' ? `, int8 prefill ${r.int8Prefill}` : '');
  lines.push(`| ${r.pair.what} | ${r.threads} | ${module} | ${f1(r.ours.prefill)} | ${f1(r.theirs.prefill)} | ` +
    `**${r.prefillRatio.toFixed(2)}×** | ${f1(r.ours.decode)} | ${f1(r.theirs.decode)} | **${r.decodeRatio.toFixed(2)}×** |`);
}
const dist = Object.fromEntries(results.filter((r) => r.distributions).map((r) => [r.pair.ours, r.distributions]));
if (dist.q8_0 && dist.f32) {
  const n = dist.q8_0.length;
  const oursKl = [], theirsKl = [], crossKl = [];
  for (let i = 0; i < n; ++i) {
    const oursF32 = normalized(floats(dist.f32[i].ours)), oursQ8 = normalized(floats(dist.q8_0[i].ours));
    const theirsFp32 = softmax(floats(dist.f32[i].theirs)), theirsInt8 = softmax(floats(dist.q8_0[i].theirs));
    oursKl.push(kl(oursF32, oursQ8));
    theirsKl.push(kl(theirsFp32, theirsInt8));
    crossKl.push(kl(oursF32, theirsFp32));
  }
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const e = (x) => x.toExponential(2);
  lines.push('');
  lines.push(`Accuracy: KL(f32 || quantized) of the last position's next-token distribution, nats, over ${n} ` +
    `prompts (${Math.min(...dist.q8_0.map((d) => d.tokens))}-${Math.max(...dist.q8_0.map((d) => d.tokens))} tokens), ` +
    'each engine against its own f32.');
  lines.push('');
  lines.push('| engine, quantized against f32 | median | mean | max |');
  lines.push('|---|---:|---:|---:|');
  lines.push(`| ours, Q8_0 against F32 | ${e(median(oursKl))} | ${e(mean(oursKl))} | ${e(Math.max(...oursKl))} |`);
  lines.push(`| ONNX Runtime Web, int8 against fp32 | ${e(median(theirsKl))} | ${e(mean(theirsKl))} | ${e(Math.max(...theirsKl))} |`);
  lines.push(`| (check) our F32 against its fp32 | ${e(median(crossKl))} | ${e(mean(crossKl))} | ${e(Math.max(...crossKl))} |`);
  lines.push('');
  lines.push(`Our Q8_0's KL is ${(median(oursKl) / median(theirsKl)).toFixed(2)}× its int8's (medians; below 1: ours is more accurate).`);
}
console.log('\n' + lines.join('\n'));
const out = path.join(kRoot, 'build/bench/ort.json');
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, JSON.stringify({ date, cpu, loadStart, loadEnd, ortVersion: kOrtVersion, runs: kRuns,
  results: results.map(({ distributions, ...r }) => r) }, null, 2) + '\n');
console.log(`\n(${((Date.now() - started) / 1000).toFixed(0)} s; results in ${path.relative(kRoot, out)})`);
