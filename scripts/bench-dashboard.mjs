#!/usr/bin/env node
// Feature dashboards' costs (issue 50, "Speed"): the GPT-2-small-shaped Q8_0 model with random
// weights and the 12 random transcoders of scripts/bench-graph.mjs (24,576 features a block, Q8_0,
// about 70 firing a token), over --tokens tokens (default 100 k) of English text: Debian's licence
// texts and its packages' copyright files, documents in a .txt corpus, windows of 128 tokens.
// Three selections, as the issue states them:
//   a graph's features   1,000 features drawn across the 12 blocks     target <= 1.3 x the prefill
//   one block's          block 6, 24,576 features                      target <= 1.6 x
//   every block's        295 k features                                target <= 4.5 x,
//                                                                      state <= 400 MB
// each as the dashboards' CPU time over prefilling the same tokens (the windows as prompts of
// [50256] + 128 tokens) in the same engine, thread count and int8 activations (CPU time: the
// machine this was written on is shared, and wall times there swing). The dashboards' time is
// split in two phases: running the windows (the forward and the encoders) and finishing the
// features (bands, histograms, and the logit tables: a [features, 768] x [768, 50257] product,
// for every block more arithmetic than the corpus's forward).
//
// Native (the default): `gpt2 dashboard` (its own split of the phases and its peak state,
// lab/dashboard.h state_bytes, and peak RSS) against `gpt2 bench --prompt-tokens 129`.
// --wasm: the page's module (build/wasm/web/gpt2-engine-node.cjs, the page's bindings and
// engine built for Node, plain SIMD128; --relaxed its relaxed twin) runs the job as
// web/worker/worker-dashboard.js does: loadTranscoders, startDashboard, the corpus fed in 1 MB
// pieces while the job wants input, continueJob until finished, the dashboards' JSON text taken
// out of the module after every call (takeDashboardPiece, as the worker takes it), against
// engine.prefill of [50256] + the corpus's first 128 tokens in the same module with capture off.
// Its state: the module's malloc'd bytes at their peak during the job less those with the model
// and transcoders loaded (the packed activations, the block being finished, a call's text).
//   node scripts/bench-dashboard.mjs [--tokens 100000] [--threads 1] [--only graph,block,all]
//   node --no-experimental-fetch scripts/bench-dashboard.mjs --wasm [--tokens 20000] [--only ...]
import {execFileSync, spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import {arg, benchModel, benchTranscoders, cpuMs, engineFactory, loadEngine, median, printMachine, repoRoot} from
    './node-engine.mjs';

const kWasm = process.argv.includes('--wasm');
const kTokens = Number(arg('tokens', '100000'));
const kThreads = kWasm ? '1' : arg('threads', '1');  // the page's module runs one thread
const kOnly = arg('only', 'graph,block,all').split(',');
const kContext = 128;
const dir = path.join(repoRoot, 'build/bench/dashboard');
const gpt2 = path.join(repoRoot, 'build/native/gpt2');
const model = benchModel('gpt2');
const transcoders = benchTranscoders();

// The corpus: whole files, in a fixed order, until there is text enough (--max-tokens cuts it).
fs.mkdirSync(dir, {recursive: true});
const corpus = path.join(dir, 'corpus.txt');
const kCorpusBytes = 8 * Math.max(kTokens, 100000);  // ~4 bytes a token: twice what is needed
if (!fs.existsSync(corpus) || fs.statSync(corpus).size < kCorpusBytes) {
  const files = [];
  for (const f of fs.readdirSync('/usr/share/common-licenses').sort()) files.push(path.join('/usr/share/common-licenses', f));
  for (const d of fs.readdirSync('/usr/share/doc').sort()) files.push(path.join('/usr/share/doc', d, 'copyright'));
  const docs = [];
  let bytes = 0;
  for (const f of files) {
    if (bytes > kCorpusBytes) break;
    try {
      if (!fs.statSync(f).isFile()) continue;
      const text = fs.readFileSync(f, 'utf8').trim();
      if (text) {
        docs.push(text);
        bytes += text.length;
      }
    } catch { /* a package without a copyright file */ }
  }
  fs.writeFileSync(corpus, docs.join('\n<|endoftext|>\n') + '\n');
}

printMachine();
// 1,000 features across the blocks, drawn with a fixed LCG's high bits (its low bits repeat
// with a short period) (a graph's features: any blocks).
let state = 12345;
const next = () => {
  state = (Math.imul(state, 1103515245) + 12345) >>> 0;
  return state >>> 8;
};
const features = new Set();
while (features.size < 1000) features.add(`${next() % 12}_${next() % 24576}`);
const selections = {
  graph: {args: ['--features', [...features].join(',')], request: {features: [...features].map((f) => f.split('_').map(Number))}},
  block: {args: ['--blocks', '6'], request: {blocks: [6]}},
  all: {args: [], request: {}},
};
const targets = {graph: 1.3, block: 1.6, all: 4.5};

// One selection's line: its phases' CPU times as ratios to prefilling its windows.
function report(name, {engine, nFeatures, nWindows, nTokens, windowsMs, featuresMs, windowsWall, featuresWall, prefillMs, extra}) {
  // Every window as a prompt of [50256] + its tokens, at the rate of a 129-token prefill.
  const prefill = (nTokens + nWindows) / (kContext + 1) * prefillMs;
  console.log(`${engine} ${name}: ${nFeatures} features over ${nWindows} windows (${nTokens} tokens), CPU time: windows ` +
              `${windowsMs.toFixed(0)} ms (${(windowsMs / prefill).toFixed(2)} x the prefill of ${prefill.toFixed(0)} ms), ` +
              `features ${featuresMs.toFixed(0)} ms (${(featuresMs / prefill).toFixed(2)} x), together ` +
              `${((windowsMs + featuresMs) / prefill).toFixed(2)} x (target <= ${targets[name]}); wall ` +
              `${windowsWall.toFixed(0)} + ${featuresWall.toFixed(0)} ms; ${extra}`);
}

if (kWasm) {
  await runWasm();
} else {
  runNativeSelections();
}

// A command's stdout, peak RSS in MB and CPU seconds (GNU time's %M in KB, %U + %S, on stderr's
// last line).
function runNative(args) {
  const r = spawnSync('/usr/bin/time', ['-f', '%M %U %S', gpt2, ...args], {encoding: 'utf8', maxBuffer: 1 << 30});
  if (r.status !== 0) throw new Error(`gpt2 ${args[0]} failed: ${r.stderr}`);
  const lines = r.stderr.trim().split('\n');
  const [rss, user, sys] = lines[lines.length - 1].split(' ').map(Number);
  return {stdout: r.stdout, rssMb: rss / 1024, cpuS: user + sys};
}

function runNativeSelections() {
  // The prefill of a window ([50256] + 128 tokens) in CPU time, as the difference of `gpt2 bench`
  // runs of 2 and 12 prefills (load and setup cancel): this 2-core machine is shared, and CPU time
  // is what another process's work does not stretch. Its wall time (best of 12) beside it.
  const prefills = (n) => runNative(['bench', '--model', model, '--prompt-tokens', String(kContext + 1),
                                     '--decode-tokens', '0', '--threads', kThreads, '--activations', 'int8',
                                     '--repeats', String(n)]);
  function prefillCpuMs() {
    const few = prefills(2), many = prefills(12);
    const ms = 1000 * (many.cpuS - few.cpuS) / 10;
    const wallMs = 1000 * Number(new RegExp(`prefill: ${kContext + 1} tokens in ([0-9.]+) s`).exec(many.stdout)[1]);
    console.log(`native prefill of ${kContext + 1} tokens: ${ms.toFixed(1)} ms of CPU (wall, best of 12: ` +
                `${wallMs.toFixed(1)} ms), ${kThreads} thread(s), int8 activations`);
    return {ms, rssMb: many.rssMb};
  }
  // Measured again after each dashboard (others' work on a shared machine moves even CPU time, by
  // the caches it shares): each ratio is over the mean of the measures before and after it.
  let before = prefillCpuMs();
  const bench = before;
  for (const name of kOnly) {
    const t0 = performance.now();
    const run = runNative(['dashboard', '--model', model, '--transcoders', transcoders, '--corpus', corpus,
                           '--max-tokens', String(kTokens), '--context', String(kContext), '--threads', kThreads,
                           '--activations', 'int8', ...selections[name].args]);
    const wall = (performance.now() - t0) / 1000;
    const line = run.stdout.trim().split('\n').pop();
    const m = new RegExp('dashboard: (\\d+) features, (\\d+) windows, (\\d+) tokens: windows (\\d+) ms, features (\\d+) ms ' +
                       '\\(cpu (\\d+) ms, (\\d+) ms\\), state peak ([0-9.]+) MB').exec(line);
    if (!m) throw new Error(`unexpected output: ${line}`);
    const [nFeatures, nWindows, nTokens, windowsWall, featuresWall, windowsMs, featuresMs, stateMb] = m.slice(1).map(Number);
    const after = prefillCpuMs();
    const prefillMs = (before.ms + after.ms) / 2;
    before = after;
    report(name, {engine: 'native', nFeatures, nWindows, nTokens, windowsMs, featuresMs, windowsWall, featuresWall, prefillMs,
                  extra: `state peak ${stateMb.toFixed(0)} MB, peak RSS ${run.rssMb.toFixed(0)} MB ` +
                         `(the model's bench: ${bench.rssMb.toFixed(0)} MB), ${wall.toFixed(0)} s in all`});
  }
}

async function runWasm() {
  const {Module, engine} = await loadEngine(engineFactory(), fs.readFileSync(model));
  engine.setCapture(false);
  const text = fs.readFileSync(corpus);
  const ids = [50256, ...engine.tokenize(text.subarray(0, 4096).toString('utf8')).slice(0, kContext)];
  if (ids.length !== kContext + 1) throw new Error('the corpus is too short for one window');
  // A window's prefill in this module: CPU and wall time, the mean and median of 5 after one to
  // warm up, before each dashboard and after the last (each ratio over the mean of the two
  // around it, as native).
  function prefillCpuMs() {
    engine.reset();
    engine.prefill(ids);
    const cpu = [], wall = [];
    for (let r = 0; r < 5; ++r) {
      engine.reset();
      const t0 = performance.now(), c0 = process.cpuUsage();
      engine.prefill(ids);
      cpu.push(cpuMs(process.cpuUsage(c0)));
      wall.push(performance.now() - t0);
    }
    engine.reset();
    const ms = cpu.reduce((a, b) => a + b, 0) / cpu.length;
    console.log(`wasm prefill of ${kContext + 1} tokens: ${ms.toFixed(1)} ms of CPU (median ${median(cpu).toFixed(1)}; ` +
                `wall median ${median(wall).toFixed(1)} ms), 1 thread, int8 activations`);
    return ms;
  }
  engine.loadTranscoders(fs.readFileSync(transcoders));
  const base = Module.memoryStats();
  let before = prefillCpuMs();
  const kPiece = 1 << 20;
  for (const name of kOnly) {
    const request = {corpus: path.basename(corpus), model: path.basename(model), dictionary: 'transcoders',
                     context: kContext, maxTokens: kTokens, ...selections[name].request};
    let peakMalloc = 0, calls = 0, longest = 0, textBytes = 0, head = '';
    const sample = () => {
      peakMalloc = Math.max(peakMalloc, Module.memoryStats().mallocBytes);
    };
    const t0 = performance.now(), c0 = process.cpuUsage();
    let windowsEnd = null, nWindows = 0, nFeatures = 0;
    // Continues the job while it wants no input and is not finished, stamping where the windows end.
    const run = () => {
      for (;;) {
        if (engine.dashboardWantsInput()) return;
        const p = engine.jobProgress();
        if (p.finished) return;
        if (p.phase === 'windows') nWindows = p.total;
        if (windowsEnd === null && p.phase === 'features') {
          windowsEnd = {wall: performance.now(), cpu: process.cpuUsage()};
          nFeatures = p.total;
        }
        const c = performance.now();
        engine.continueJob();
        longest = Math.max(longest, performance.now() - c);
        const piece = engine.takeDashboardPiece().text;
        textBytes += piece.length;
        if (!head && piece.length) head = new TextDecoder().decode(piece.subarray(0, 4096));
        if (++calls % 16 === 0) sample();
      }
    };
    try {
      engine.startDashboard(request, -1);
      for (let at = 0; at < text.length; at += kPiece) {
        engine.feedDashboard(text.subarray(at, at + kPiece));
        run();
        if (engine.dashboardInputFull()) break;
      }
      engine.endDashboardInput();
      run();
    } catch (e) {  // the module's 4 GB, say: the next selection runs in a fresh job
      console.log(`wasm ${name}: failed after ${((performance.now() - t0) / 1000).toFixed(0)} s, ` +
                  `${calls} calls, ${nWindows} windows, malloc'd ${(peakMalloc / 1e6).toFixed(0)} MB at most: ${e.message}`);
      try {
        engine.endJob();
      } catch { /* no job left */ }
      continue;
    }
    sample();
    const wallAll = performance.now() - t0, cpuAll = cpuMs(process.cpuUsage(c0));
    const windowsMs = cpuMs(process.cpuUsage(c0)) - cpuMs(process.cpuUsage(windowsEnd.cpu));
    const windowsWall = windowsEnd.wall - t0;
    // The corpus holds more than kTokens tokens (kCorpusBytes), so the job reads exactly that many;
    // the text's metadata says so.
    textBytes += engine.takeDashboardPiece().text.length;
    const textNote = `${(textBytes / 1e6).toFixed(0)} MB of text taken in pieces`;
    const m = /"n_windows":(\d+),"n_tokens":(\d+)/.exec(head);
    if (Number(m[1]) !== nWindows) throw new Error(`the text has ${m[1]} windows, the job ${nWindows}`);
    const nTokens = Number(m[2]);
    engine.endJob();
    const after = prefillCpuMs();
    const prefillMs = (before + after) / 2;
    before = after;
    report(name, {engine: 'wasm', nFeatures, nWindows, nTokens, windowsMs, featuresMs: cpuAll - windowsMs, windowsWall,
                  featuresWall: wallAll - windowsWall, prefillMs,
                  extra: `state peak ${((peakMalloc - base.mallocBytes) / 1e6).toFixed(0)} MB (malloc'd beyond the model ` +
                         `and transcoders' ${(base.mallocBytes / 1e6).toFixed(0)} MB; heap ` +
                         `${(Module.memoryStats().heapBytes / 1e6).toFixed(0)} MB), longest continueJob ` +
                         `${longest.toFixed(0)} ms, ${calls} calls; ${textNote}; ${(wallAll / 1000).toFixed(0)} s in all`});
  }
}
