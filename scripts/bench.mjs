#!/usr/bin/env node
// One benchmark run comparing us with the peer on the same machine, the same files and the same
// browser: GPT-2-small-shaped synthetic models (same tensor shapes and bytes as real GPT-2 small,
// so speed is representative; the text they write is not), with Q8_0, Q4_0 and F32 matrices.
//
//   a) native: build/native/gpt2 bench, 1 and 2 threads, every weight type;
//   b) ours in headless Chromium: the page's ES6 wasm module (build/wasm/web/gpt2-engine.js),
//      one thread, prefill of a 128-token prompt then 64 greedy decode steps;
//   c) the peer, wllama (llama.cpp compiled to wasm, npm @wllama/wllama), same Chromium, same
//      file, one thread, same prompt and decode count, timed by llama.cpp itself;
//   e) ours alone, the first weight type (scripts/bench-ours.mjs): a 1024-token prompt against a
//      128-token one, decode at position 1000 against 0, the cost of capture in time and wasm
//      heap, two threads against one (the pthreads module in a cross-origin isolated page), and
//      a cached reload of the site to its first generated token;
//   d) the page's experiments (build/site in the same Chromium, one thread, the first weight
//      type): "which heads matter" on a 32-token prompt and activation patching of a 16-token
//      pair, each as its time over a prefill (capture off) of the same length measured in the
//      same page, and how long the page takes to show a real click meanwhile (from the input
//      event to the frame after it).
// For every weight type both engines are loaded into one fresh page, do one warm-up run each,
// then --runs runs alternating (ours, wllama, ours, ...); figures are the median run. Prints the
// machine, date, browser and load average, every run, then one Markdown table (ours, wllama,
// ratio, our wasm heap after load); also writes build/bench/results.json.
//
//   node scripts/bench.mjs [--runs 5] [--types q8_0,q4_0,f32] [--prompt-tokens 128]
//                          [--decode-tokens 64] [--skip-native] [--skip-browser] [--skip-experiments]
//                          [--skip-compare] [--skip-ours] [--skip-family] [--skip-gradients] [--skip-sae]
//                          [--skip-graph] [--skip-dashboard] [--skip-profile] [--skip-ort]
//                          [--max-load 0.5] [--engine build/wasm/web/gpt2-engine.js] [--site build/site]
// (--skip-compare: in the browser, only the page's experiments, not the ours/wllama runs.)
// At the end, each in a script of its own:
//   the gradients against their targets (scripts/bench-gradients.mjs);
//   the GPT-2 family (scripts/bench-family.mjs): XL against small in the page's wasm engine,
//      and converting GPT-2 medium natively, streamed under Node and in the page;
//   sparse autoencoders (scripts/bench-sae.mjs): encoding a GPT-2-small SAE (24,576 features,
//      Q8_0) over a prompt against its prefill, a steered re-run, converting the SAE in wasm;
//   attribution graphs (scripts/bench-graph.mjs): 12 GPT-2-small transcoders (Q8_0), a 16-token
//      prompt's graph against its prefill, and the memory it takes;
//   feature dashboards (scripts/bench-dashboard.mjs): a graph's 1,000 features, one block's and
//      every block's over 100 k tokens natively, the first two over 20 k in the page's module
//      (--wasm), against prefilling those tokens in the same engine, and the state;
//   where the page's prefill goes, per kernel (scripts/bench-profile.mjs): V8's profiler in
//      Chromium over the page's module with its function names, Q8_0 and F32, plain and relaxed;
//   ONNX Runtime Web, the engine under transformers.js (scripts/bench-ort.mjs, issue 51): its
//      int8 and fp32 against our Q8_0 and F32, 1 and 2 threads, and each one's KL from its f32.
// Needs `bash scripts/build.sh` first (native tools and build/wasm/web).
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import * as H from '../tests/web/wllama-harness.mjs';
import * as Ours from './bench-ours.mjs';
import { benchModel, cpuKind } from './node-engine.mjs';

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}
const flag = (name) => process.argv.includes(`--${name}`);

const kRoot = H.repoRoot;
const kRuns = Number(arg('runs', '5'));
const kTypes = arg('types', 'q8_0,q4_0,f32').split(',');
const kPromptTokens = Number(arg('prompt-tokens', '128'));
const kDecodeTokens = Number(arg('decode-tokens', '64'));
const kMaxLoad = Number(arg('max-load', '0.5'));
const kBenchDir = path.join(kRoot, 'build/bench');
const kCli = path.join(kRoot, 'build/native/gpt2');
const kMakeModel = path.join(kRoot, 'build/native/gpt2-make-model');
const kWllamaVersion = JSON.parse(fs.readFileSync(
  path.join(kRoot, 'node_modules/@wllama/wllama/package.json'), 'utf8')).version;
// --engine: another build of the page's module (under the repository, e.g. an earlier build
// copied to build/bench/base/) to measure before/after in the same conditions.
const kEngineJs = path.resolve(kRoot, arg('engine', 'build/wasm/web/gpt2-engine.js'));
// --site: the page for the experiments, likewise (e.g. an earlier build-site.sh output
// assembled under build/bench/ with GPT2_SITE_DIR).
const kSite = path.resolve(kRoot, arg('site', 'build/site'));

function need(file, what) {
  if (!fs.existsSync(file)) {
    console.error(`bench: ${path.relative(kRoot, file)} is missing (${what}); run: bash scripts/build.sh`);
    process.exit(1);
  }
}

// ---- the machine ----------------------------------------------------------------------------

function machine() {
  let model = os.cpus()[0]?.model || 'unknown CPU';
  try {
    const m = /^Model name:\s*(.+)$/m.exec(execFileSync('lscpu', { encoding: 'utf8' }));
    if (m) model = m[1].trim();
  } catch { /* lscpu missing: keep os.cpus() */ }
  const { kind, simd } = cpuKind();
  return { cpu: model, kind, simd, cores: os.cpus().length, memGB: os.totalmem() / 2 ** 30, kernel: os.release() };
}

// ---- models ---------------------------------------------------------------------------------

// ---- a) native ------------------------------------------------------------------------------

// The CLI's default --activations (fastest), as a user runs it.
function nativeBench(model, threads, { decodeTokens = kDecodeTokens, repeats = 3 } = {}) {
  const out = execFileSync(kCli, ['bench', '--model', model, '--threads', String(threads),
    '--prompt-tokens', String(kPromptTokens), '--decode-tokens', String(decodeTokens),
    '--repeats', String(repeats)], { encoding: 'utf8' });
  const prefill = /prefill: .*= ([\d.]+) tokens\/s/.exec(out);
  const decode = /decode: .*= ([\d.]+) tokens\/s/.exec(out);
  const target = /kernel target (\S+)/.exec(out);
  if (!prefill || !decode) throw new Error(`unexpected output of gpt2 bench:\n${out}`);
  return { prefill: Number(prefill[1]), decode: Number(decode[1]), target: target ? target[1].replace(/,$/, '') : '?' };
}

// ---- b) and c) in the page ---------------------------------------------------------------------

// Both engines are loaded into one page and their runs alternate (ours, wllama, ours, ...), so
// a burst of load from elsewhere on the machine hits both sides alike instead of one of them.
// These functions run inside the page; state lives on `window` between them.

// Ours: Ours.loadEngines and Ours.benchRun (the same ES6 module and Engine calls as
// web/worker/worker.js: streamed load, finishLoad(1)), on the page's main thread, capture off; a run
// prefills the prompt, then nDecode greedy tokens, each sampled and fed back (as the native
// bench does, so nDecode forward passes).

// wllama: one thread (the page is not cross-origin isolated, so wllama also picks its
// single-thread build), n_ctx 256, its default batch sizes.
async function wllamaLoad({ modelUrl }) {
  const { Wllama } = await import('/node_modules/@wllama/wllama/esm/index.js');
  const wllama = new Wllama({ default: '/node_modules/@wllama/wllama/esm/wasm/wllama.wasm' },
    { suppressNativeLog: true });
  const blob = await (await fetch(modelUrl)).blob();
  await wllama.loadModel([blob], { n_threads: 1, n_ctx: 256, n_gpu_layers: 0, seed: 1 });
  window.peer = wllama;
  return { threads: wllama.getNumThreads() };
}

// One completion, greedy, no prompt cache (each run prefills the whole prompt). Figures are
// llama.cpp's own (llama-server's "timings"); wallMs is seen from the page as a check.
async function wllamaRun({ promptText, nDecode }) {
  const t0 = performance.now();
  const result = await window.peer.createCompletion({ prompt: promptText, max_tokens: nDecode,
    temperature: 0, top_k: 1, ignore_eos: true, cache_prompt: false });
  return { ...result.timings, wallMs: performance.now() - t0 };
}

// ---- the run ----------------------------------------------------------------------------------

need(kCli, 'native CLI');
need(kMakeModel, 'synthetic model writer');
const started = Date.now();
const host = machine();
const load = os.loadavg();
const date = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
console.log(`date ${date}`);
console.log(`machine: ${host.kind}, SIMD ${host.simd || 'unknown'}, ${host.cores} logical cores, ` +
            `${host.memGB.toFixed(1)} GiB, Linux ${host.kernel}`);
console.log(`load average at start: ${load.map((x) => x.toFixed(2)).join(' ')}`);
if (load[0] > kMaxLoad) {
  console.log(`WARNING: the machine is busy (1-minute load ${load[0].toFixed(2)} > ${kMaxLoad}); ` +
    'figures will be low and noisy. Re-run when it is idle.');
}

const models = Object.fromEntries(kTypes.map((t) => [t, benchModel('gpt2', t)]));
const sizeMB = (f) => fs.statSync(f).size / 1e6;
const median = Ours.median;

const results = { date, machine: host, loadAtStart: load, runs: kRuns, promptTokens: kPromptTokens,
  engine: path.relative(kRoot, kEngineJs), site: path.relative(kRoot, kSite),
  decodeTokens: kDecodeTokens, models: Object.fromEntries(Object.entries(models).map(
    ([t, f]) => [t, { file: path.relative(kRoot, f), megabytes: sizeMB(f) }])), native: [],
  browser: {} };

if (!flag('skip-native')) {
  for (const type of kTypes) {
    for (const threads of [1, 2]) {
      const r = nativeBench(models[type], threads);
      results.native.push({ type, threads, ...r });
      console.log(`native ${type} ${threads}T (${r.target}): prefill ${r.prefill.toFixed(1)} tok/s, ` +
        `decode ${r.decode.toFixed(1)} tok/s`);
    }
  }
  // Issue 10's native target, Q8_0 prefill against F32 prefill: from runs of the two that take
  // turns (the rows above run minutes apart, and a burst of load in between moved their ratio
  // from 1.09 to 0.67 between two runs of this script on one morning).
  if (models.q8_0 && models.f32) {
    const pairs = [];
    for (let r = 0; r < 5; ++r) {
      const q8 = nativeBench(models.q8_0, 1, { decodeTokens: 1, repeats: 1 });
      const f32 = nativeBench(models.f32, 1, { decodeTokens: 1, repeats: 1 });
      pairs.push({ q8_0: q8.prefill, f32: f32.prefill, target: q8.target });
    }
    results.nativePrefillPairs = pairs;
    console.log(`native 1T prefill in turns, Q8_0 / F32 tok/s: ${pairs.map((p) => `${p.q8_0.toFixed(1)} / ${p.f32.toFixed(1)}`).join(', ')}`);
  }
}

// Both engines on one weight type in a fresh page: load both, one warm-up run each (llama.cpp
// warms up at load; V8 tiers our hot functions up during the first run), then kRuns runs
// alternating, so a burst of load from elsewhere hits both sides alike.
async function compareInBrowser(browser, origin, type, promptText) {
  const errors = [];
  const page = await browser.context.newPage();
  page.on('pageerror', (e) => errors.push(e.message));
  const inPage = async (fn, args) => {
    try {
      return await page.evaluate(fn, args);
    } catch (e) {
      throw new Error(`${e.message}\n${errors.join('\n')}`);
    }
  };
  try {
    await page.goto(origin + '/');
    const modelUrl = `/__model/bench-${type}.gguf`;
    const ours = await inPage(Ours.loadEngines, { engineUrl: '/' + path.relative(kRoot, kEngineJs), modelUrl,
      promptText, threads: [1] });
    // The prompt's words are one token each, so its first kPromptTokens tokens are a prompt.
    if (ours.tokens < kPromptTokens) throw new Error(`prompt has ${ours.tokens} tokens, wanted ${kPromptTokens}`);
    const oursRun = () => inPage(Ours.benchRun, { k: 0, n: kPromptTokens, nDecode: kDecodeTokens, capture: false });
    const peer = await inPage(wllamaLoad, { modelUrl });
    await oursRun();
    await inPage(wllamaRun, { promptText, nDecode: kDecodeTokens });
    const oursRuns = [], peerRuns = [];
    for (let r = 0; r < kRuns; ++r) {
      oursRuns.push(await oursRun());
      peerRuns.push(await inPage(wllamaRun, { promptText, nDecode: kDecodeTokens }));
    }
    await inPage(async () => { window.bench.engines.forEach((e) => e.delete()); await window.peer.exit(); }, {});
    const perSecond = (n, ms) => n / (ms / 1000);
    for (const t of peerRuns) {
      if (t.prompt_n !== kPromptTokens || t.cache_n !== 0) {
        console.log(`note: wllama processed ${t.prompt_n} prompt tokens (${t.cache_n} cached), wanted ${kPromptTokens}`);
      }
    }
    const r = {
      userAgent: ours.userAgent,
      ours: { simd: ours.info.simd, relaxedSimd: ours.relaxed, relaxedError: ours.relaxedError, int8Prefill: ours.info.int8_prefill, kvCache: ours.info.kv_cache, kvValueBytes: ours.info.kv_value_bytes, heapMB: ours.heapBytes / 1e6,
        prefillRuns: oursRuns.map((x) => perSecond(kPromptTokens, x.prefillMs)),
        decodeRuns: oursRuns.map((x) => perSecond(kDecodeTokens, x.decodeMs)) },
      wllama: { version: kWllamaVersion, threads: peer.threads,
        prefillRuns: peerRuns.map((t) => t.prompt_per_second),
        decodeRuns: peerRuns.map((t) => t.predicted_per_second),
        promptN: peerRuns[0].prompt_n, predictedN: peerRuns[0].predicted_n,
        runs: peerRuns.map((t) => ({ promptMs: t.prompt_ms, predictedMs: t.predicted_ms, wallMs: t.wallMs })) },
    };
    for (const side of [r.ours, r.wllama]) {
      side.prefill = median(side.prefillRuns);
      side.decode = median(side.decodeRuns);
    }
    // Ratios of runs taken side by side (run i of ours over run i of wllama), then the median:
    // steadier than the ratio of medians when the load changes during the run.
    r.prefillRatio = median(r.ours.prefillRuns.map((x, i) => x / r.wllama.prefillRuns[i]));
    r.decodeRatio = median(r.ours.decodeRuns.map((x, i) => x / r.wllama.decodeRuns[i]));
    return r;
  } finally {
    await page.close();
  }
}

// ---- d) the page's experiments -------------------------------------------------------------

// In the page: how long a real click (a trusted input event, sent by the browser) on a checkbox
// takes to show, from the event's time stamp (when the browser took the input, so a busy main
// thread counts) to the end of the next frame after its handlers ran (a task posted from that
// frame's requestAnimationFrame runs once the frame is rendered). The checkbox's own handler
// redraws the attention grid, as a person toggling it would see.
function latencyProbeStart() {
  window.latencies = [];
  window.latencyListener = (e) => {
    if (!e.isTrusted) return;
    const t0 = e.timeStamp;
    requestAnimationFrame(() => {
      const channel = new MessageChannel();
      channel.port1.onmessage = () => window.latencies.push(performance.now() - t0);
      channel.port2.postMessage(0);
    });
  };
  document.querySelector('[data-testid=exp-knock-mode]').addEventListener('click', window.latencyListener);
  // The main thread's own long tasks (over 50 ms) meanwhile: what would delay a click.
  window.longTasks = [];
  window.longTaskObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.longTasks.push(e.duration);
  });
  window.longTaskObserver.observe({type: 'longtask'});
}

function latencyProbeStop() {
  document.querySelector('[data-testid=exp-knock-mode]').removeEventListener('click', window.latencyListener);
  window.longTaskObserver.disconnect();
  return {latencies: window.latencies, longTasks: window.longTasks};
}

// From here (Node), every 250 ms a mouse click on the checkbox until stop() is called (scrolled
// into view each time: starting a job scrolls the page to its button).
function startClicking(page) {
  const box = page.getByTestId('exp-knock-mode');
  let clicking = true;
  const loop = (async () => {
    while (clicking) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      if (clicking) await box.click({force: true});
    }
  })();
  return async () => { clicking = false; await loop; };
}

// CPU time (ms) of Chromium's dedicated worker threads so far (Linux /proc: utime + stime of
// every thread named DedicatedWorker*; the page's engine worker is the only one). A job's and
// a prefill's CPU time in that thread give a ratio that time spent descheduled on a busy
// machine does not skew, as it does wall time. Null where /proc is not there.
function workerCpuMs() {
  const tick = 1000 / 100;  // USER_HZ: 100 on Linux
  let ticks = 0, found = false;
  try {
    for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      let tids;
      try {
        if (!/chrom/i.test(fs.readFileSync(`/proc/${pid}/comm`, 'utf8'))) continue;
        tids = fs.readdirSync(`/proc/${pid}/task`);
      } catch { continue; }  // gone meanwhile
      for (const tid of tids) {
        try {
          if (!/^DedicatedWorker/.test(fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8'))) continue;
          const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
          const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
          ticks += Number(f[11]) + Number(f[12]);  // fields 14 and 15 of proc(5)
          found = true;
        } catch { /* the thread ended */ }
      }
    }
  } catch { return null; }
  return found ? ticks * tick : null;
}

async function experimentsInPage(browser, origin, type, words) {
  const page = await browser.context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const text = (n, last) => [...Array.from({ length: n - 1 }, (_, i) => words[i % words.length]), last].join(' ');
  const pageError = async () => ((await page.getByTestId('error').isVisible()) ? await page.getByTestId('error').textContent() : '');
  // Until fn holds or the page shows an error (then thrown).
  const waitFor = async (fn, what) => {
    console.log(`  page: ${what}…`);
    // Polled every 100 ms, not every frame (Playwright's default), which kept the main thread
    // drawing frames throughout a job, competing with the worker on a small machine.
    await page.waitForFunction(`(${fn})() || !document.querySelector('[data-testid=error]').hidden`, null,
                               { timeout: 900_000, polling: 100 });
    const e = await pageError();
    if (e || errors.length) throw new Error(`${what}: ${e} ${errors.join('\n')}`);
  };
  try {
    await page.goto(`${origin}/${path.relative(kRoot, kSite)}/index.html?model=/__model/bench-${type}.gguf&debug=1`);
    await waitFor(() => document.querySelector('[data-testid=progress]').dataset.source ||
                        !document.querySelector('[data-testid=error]').hidden, 'load');
    await page.getByTestId('temperature').fill('0');
    await page.getByTestId('max-tokens').fill('1');
    const generate = async (prompt, capture) => {
      await page.getByTestId('prompt').fill(prompt);
      await page.getByTestId('capture').setChecked(capture);
      await page.getByTestId('generate').click();
      await waitFor(() => !window.gpt2Page.state.generating && window.gpt2Page.state.statsData.prefillMs !== undefined,
                    'generate');
      return page.evaluate(() => window.gpt2Page.state.statsData.prefillMs);
    };
    // The prefill unit: the same number of tokens, capture off, 3 runs (after a warm-up). By
    // CPU time: a generation is a prefill and a token (sampled and fed), so the worker thread's
    // CPU time over three generations of 1 token and three of 2 gives a prefill's as
    // 2 x (1 token) - (2 tokens).
    const cpuUnits = [];
    const prefillRuns = async (prompt) => {
      await generate(prompt, false);
      const cpu0 = workerCpuMs();
      const runs = [await generate(prompt, false), await generate(prompt, false), await generate(prompt, false)];
      const cpu1 = workerCpuMs();
      await page.getByTestId('max-tokens').fill('2');
      for (let i = 0; i < 3; ++i) await generate(prompt, false);
      const cpu2 = workerCpuMs();
      await page.getByTestId('max-tokens').fill('1');
      if (cpu0 !== null && cpu2 !== null) cpuUnits.push((2 * (cpu1 - cpu0) - (cpu2 - cpu1)) / 3);
      return runs;
    };
    // Until the views have drawn what the last generation asked for (activations, lens) and a
    // frame comes at once: the job's clicks then wait for the job alone.
    const settle = async () => {
      await waitFor(() => window.gpt2Page.state.acts && window.gpt2Page.state.lens, 'views');
      for (;;) {
        const ms = await page.evaluate(() => new Promise((resolve) => {
          const t0 = performance.now();
          requestAnimationFrame(() => resolve(performance.now() - t0));
        }));
        if (ms < 50) break;
      }
    };
    let jobCpuMs = null;
    const job = async (start, done) => {
      await page.evaluate(latencyProbeStart);
      const cpu0 = workerCpuMs();
      const stopClicking = startClicking(page);
      try {
        await start();
        await waitFor(done, 'job');
        const cpu1 = workerCpuMs();
        jobCpuMs = cpu0 !== null && cpu1 !== null ? cpu1 - cpu0 : null;
      } finally {
        await stopClicking();
      }
      // The last click's frame may still be on its way.
      await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 50))));
      return page.evaluate(latencyProbeStop);
    };
    const out = {};
    // Which heads matter, at the last of 32 prompt tokens.
    // The unit is measured before and after the job (the median of the six), as the machine's
    // load may change meanwhile.
    const prompt32 = text(32, words[31 % words.length]);
    const before32 = await prefillRuns(prompt32);
    await generate(prompt32, true);
    await settle();
    const sweepLatency = await job(() => page.getByTestId('sweep-run').click(),
                                   () => window.gpt2Page.state.sweep.result && !window.gpt2Page.state.sweep.running);
    const sweep = await page.evaluate(() => window.gpt2Page.state.sweep.result);
    if (sweep.position !== 31 || sweep.done !== sweep.total) throw new Error(`sweep at ${sweep.position}, ${sweep.done}/${sweep.total}`);
    const sweepCpu = jobCpuMs;
    const unit32 = median([...before32, ...(await prefillRuns(prompt32))]);
    const cpuUnit32 = cpuUnits.length ? median(cpuUnits) : null;
    out.sweep = { tokens: 32, ms: sweep.ms, prefillMs: unit32, prefills: sweep.ms / unit32, target: 80,
                  latency: sweepLatency, cpuMs: sweepCpu, cpuPrefillMs: cpuUnit32,
                  cpuPrefills: sweepCpu !== null && cpuUnit32 ? sweepCpu / cpuUnit32 : null };
    // Activation patching of two 16-token prompts that differ in their last word (the first last
    // word whose prediction differs from the clean one's).
    cpuUnits.length = 0;
    const before16 = await prefillRuns(text(16, 'house'));
    await generate(text(16, 'house'), true);
    await settle();
    for (const last of ['mat', 'dog', 'cat', 'fox', 'old', 'near']) {
      await page.getByTestId('patch-clean').fill(text(16, 'house'));
      await page.getByTestId('patch-corrupted').fill(text(16, last));
      const latency = await job(() => page.getByTestId('patch-run').click(),
                                () => !window.gpt2Page.state.patching.running &&
                                      (window.gpt2Page.state.patching.result || !document.querySelector('[data-testid=error]').hidden))
          .catch((e) => (/same next token/.test(e.message) ? null : Promise.reject(e)));
      if (!latency) continue;
      const r = await page.evaluate(() => window.gpt2Page.state.patching.result);
      const patchCpu = jobCpuMs;
      const unit16 = median([...before16, ...(await prefillRuns(text(16, 'house')))]);
      const cpuUnit16 = cpuUnits.length ? median(cpuUnits) : null;
      out.patching = { tokens: 16, ms: r.ms, prefillMs: unit16, prefills: r.ms / unit16, target: 13 * 16 / 2, latency,
                       cpuMs: patchCpu, cpuPrefillMs: cpuUnit16,
                       cpuPrefills: patchCpu !== null && cpuUnit16 ? patchCpu / cpuUnit16 : null };
      break;
    }
    if (!out.patching) throw new Error('no corrupted prompt with another answer');
    for (const r of Object.values(out)) {
      r.longTasks = r.latency.longTasks.length;
      r.longestTask = Math.max(0, ...r.latency.longTasks);
      const v = [...r.latency.latencies].sort((a, b) => a - b);
      r.latencyMax = v.length ? v[v.length - 1] : NaN;
      r.latencyP95 = v.length ? v[Math.min(v.length - 1, Math.floor(v.length * 0.95))] : NaN;
      r.clicks = v.length;
      delete r.latency;
    }
    return out;
  } finally {
    await page.close();
  }
}

// Words that GPT-2's BPE keeps as single tokens, so any prefix of n words is n tokens.
const kWords = ' The quick brown fox jumps over the lazy dog and the small cat sat on the mat near the old house'.split(' ').slice(1);

if (!flag('skip-browser')) {
  need(kEngineJs, 'WebAssembly engine for the page');
  const promptText = Array.from({ length: kPromptTokens }, (_, i) => kWords[i % kWords.length]).join(' ');
  const served = Object.fromEntries(kTypes.map((t) => [`/__model/bench-${t}.gguf`, models[t]]));
  const { server, origin } = await H.startServer(served);
  const browser = await H.launchChromium();
  try {
    const runsText = (xs) => xs.map((x) => x.toFixed(1)).join(' ');
    for (const type of flag('skip-compare') ? [] : kTypes) {
      const r = await compareInBrowser(browser, origin, type, promptText);
      results.browserName = /(?:Headless)?Chrome\/[\d.]+/.exec(r.userAgent)?.[0] || r.userAgent;
      results.browser[type] = r;
      console.log(`ours wasm ${type} 1T: prefill ${r.ours.prefill.toFixed(1)} tok/s, decode ` +
        `${r.ours.decode.toFixed(1)} tok/s (runs: prefill ${runsText(r.ours.prefillRuns)}; ` +
        `decode ${runsText(r.ours.decodeRuns)}); heap after load ${r.ours.heapMB?.toFixed(1)} MB; ` +
        `${r.ours.simd}, int8 prefill ${r.ours.int8Prefill}`);
      if (!r.ours.relaxedSimd) {
        // Without the twin's FMA our f32 prompts run at about 0.6x: a ratio from such a run is
        // not the page's on a browser with relaxed SIMD.
        console.log(`WARNING: ours ran the plain SIMD128 module (${r.ours.relaxedError ?
          `the relaxed SIMD twin could not start: ${r.ours.relaxedError}` : 'this browser has no relaxed SIMD'})`);
      }
      console.log(`wllama wasm ${type} ${r.wllama.threads}T: prefill ${r.wllama.prefill.toFixed(1)} tok/s, decode ` +
        `${r.wllama.decode.toFixed(1)} tok/s (runs: prefill ${runsText(r.wllama.prefillRuns)}; ` +
        `decode ${runsText(r.wllama.decodeRuns)}; llama.cpp ms vs page wall ms: ` +
        `${r.wllama.runs.map((x) => `${(x.promptMs + x.predictedMs).toFixed(0)}/${x.wallMs.toFixed(0)}`).join(' ')})`);
      console.log(`  ratio (median of paired runs): prefill ${r.prefillRatio.toFixed(2)}x, decode ${r.decodeRatio.toFixed(2)}x; ` +
        `load average now ${os.loadavg()[0].toFixed(2)}`);
    }
    if (!flag('skip-ours')) {
      const type = kTypes[0];
      const common = { browser, origin, modelUrl: `/__model/bench-${type}.gguf`, runs: Math.min(kRuns, 3), log: console.log };
      const longText = Array.from({ length: 1100 }, (_, i) => kWords[i % kWords.length]).join(' ');
      console.log(`ours ${type}: long prompts and capture (1 thread)…`);
      const long = await Ours.longAndCapture({ ...common, engineUrl: '/' + path.relative(kRoot, kEngineJs), promptText: longText });
      console.log(`ours ${type}: two threads against one (pthreads module, isolated page)…`);
      const isolated = await H.startServer(served, { isolated: true });
      let threads;
      try {
        threads = await Ours.twoThreads({ ...common, origin: isolated.origin, promptText,
          engineUrl: '/' + path.relative(kRoot, kEngineJs.replace(/gpt2-engine\.js$/, 'gpt2-engine-mt.js')) });
      } finally {
        isolated.server.close();
      }
      console.log(`ours ${type}: cached reload of build/site…`);
      need(path.join(kRoot, 'build/site/index.html'), 'the page (build/site)');
      const reload = await Ours.cachedReload(common);
      results.ours = { type, long, threads, reload };
    }
    if (!flag('skip-experiments')) {
      need(path.join(kSite, 'index.html'), `the page (${path.relative(kRoot, kSite)})`);
      results.experiments = { type: kTypes[0], ...(await experimentsInPage(browser, origin, kTypes[0], kWords)) };
      for (const [name, r] of Object.entries(results.experiments)) {
        if (name === 'type') continue;
        console.log(`page ${name} (${r.tokens} tokens, ${kTypes[0]}): ${(r.ms / 1000).toFixed(1)} s = ` +
          `${r.prefills.toFixed(1)} prefills of ${r.prefillMs.toFixed(0)} ms (target ${r.target}); a click answered ` +
          `within ${r.latencyMax.toFixed(0)} ms (95%: ${r.latencyP95.toFixed(0)} ms, ${r.clicks} clicks); the page's ` +
          `main thread had ${r.longTasks} tasks over 50 ms (longest ${r.longestTask.toFixed(0)} ms); by the worker ` +
          `thread's CPU time ${r.cpuPrefills === null ? '–' : r.cpuPrefills.toFixed(1)} prefills ` +
          `(${r.cpuMs === null ? '–' : (r.cpuMs / 1000).toFixed(1)} s / ${r.cpuPrefillMs === null ? '–' : r.cpuPrefillMs.toFixed(0)} ms)`);
      }
    }
  } finally {
    await browser.close();
    server.close();
  }
}

results.loadAtEnd = os.loadavg();
results.seconds = (Date.now() - started) / 1000;
fs.mkdirSync(kBenchDir, { recursive: true });
fs.writeFileSync(path.join(kBenchDir, 'results.json'), JSON.stringify(results, null, 2) + '\n');

// ---- the table --------------------------------------------------------------------------------

const f = (x) => (x === undefined || x === null ? '–' : x.toFixed(1));
const lines = [];
lines.push(`GPT-2 small shape (124M parameters), prompt ${kPromptTokens} tokens, decode ${kDecodeTokens} ` +
  `tokens greedy, tokens/s; browser: median of ${kRuns} runs after a warm-up, native: best of 3.`);
lines.push(`${date}; ${host.kind} [${host.simd}], ${host.cores} logical cores; ${results.browserName || 'no browser run'}; ` +
  `load average at start ${load[0].toFixed(2)}, at end ${results.loadAtEnd[0].toFixed(2)}.`);
lines.push('');
lines.push('| weights | where | threads | ours prefill | ours decode | wllama prefill | wllama decode | ' +
  'prefill ratio | decode ratio | our heap after load |');
lines.push('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const type of kTypes) {
  const r = results.browser[type];
  if (r) {
    lines.push(`| ${type} | Chromium wasm${r.ours.relaxedSimd ? ' (relaxed SIMD)' : ''} | 1 | ${f(r.ours.prefill)} | ${f(r.ours.decode)} | ` +
      `${f(r.wllama.prefill)} | ${f(r.wllama.decode)} | **${r.prefillRatio.toFixed(2)}×** | ` +
      `**${r.decodeRatio.toFixed(2)}×** | ${f(r.ours.heapMB)} MB (file ${f(results.models[type].megabytes)} MB) |`);
  }
  for (const n of results.native.filter((x) => x.type === type)) {
    lines.push(`| ${type} | native (${n.target}) | ${n.threads} | ${f(n.prefill)} | ${f(n.decode)} | | | | | |`);
  }
}
// Issue 10's native row: the CLI's default mode (--activations fastest: f32 prompts on AVX-512).
if (results.nativePrefillPairs) {
  const pairs = results.nativePrefillPairs;
  const ratio = median(pairs.map((p) => p.q8_0 / p.f32));
  lines.push('');
  lines.push('| native, 1 thread, default --activations | ours | target | |');
  lines.push('|---|---:|---:|---|');
  lines.push(`| Q8_0 prefill / F32 prefill, 5 pairs in turns (median ${f(median(pairs.map((p) => p.q8_0)))} / ` +
    `${f(median(pairs.map((p) => p.f32)))} tok/s, ${pairs[0].target}) | ${ratio.toFixed(2)}× | ≥ 1× | ` +
    `${ratio >= 1 ? 'met' : '**not met**'} |`);
}
if (results.experiments) {
  lines.push('');
  lines.push(`The page's experiments (Chromium, 1 thread, ${results.experiments.type}): time in prefills of the same ` +
    'number of tokens (capture off) measured in the same page; meanwhile a real click every 250 ms, timed from ' +
    'its input event to the frame after it, and the main thread\'s long tasks. "By worker CPU time": the same ' +
    'ratio from the engine worker thread\'s CPU time (/proc), which a busy machine does not skew.');
  lines.push('');
  lines.push('| experiment | tokens | time | prefill | in prefills | by worker CPU time | target | ' +
    'click shown within (max / 95%) | main-thread tasks > 50 ms |');
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const [name, what] of [['sweep', 'which heads matter (144 heads)'], ['patching', 'activation patching (blocks × positions)']]) {
    const r = results.experiments[name];
    if (!r) continue;
    lines.push(`| ${what} | ${r.tokens} | ${(r.ms / 1000).toFixed(1)} s | ${r.prefillMs.toFixed(0)} ms | ` +
      `**${r.prefills.toFixed(1)}** | ${r.cpuPrefills === null ? '–' : `**${r.cpuPrefills.toFixed(1)}**`} | ` +
      `≤ ${r.target} | ${r.latencyMax.toFixed(0)} / ${r.latencyP95.toFixed(0)} ms ` +
      `(${r.clicks} clicks; target 100) | ${r.longTasks} (longest ${r.longestTask.toFixed(0)} ms) |`);
  }
}
if (results.ours) {
  const { type, long, threads, reload } = results.ours;
  const row = (what, value, target, met) => lines.push(`| ${what} | ${value} | ${target} | ${met ? 'met' : '**not met**'} |`);
  lines.push('');
  lines.push(`Ours against ourselves (Chromium, ${type}; median of paired runs in one page).`);
  lines.push('');
  lines.push('| measure | ours | target | |');
  lines.push('|---|---:|---:|---|');
  row('prefill of 1024 tokens / of 128 tokens (8 in a row), tokens/s', `${long.longPrefillRatio.toFixed(2)}×`, '≥ 0.8×', long.longPrefillRatio >= 0.8);
  row('decode at positions 1000-1023 / 1-24 (in turns), tokens/s', `${long.longDecodeRatio.toFixed(2)}×`, '≥ 0.8×', long.longDecodeRatio >= 0.8);
  row('capture on / off: prefill (128; 3 each, in turns), tokens/s', `${long.capturePrefillRatio.toFixed(2)}×`, '≥ 0.85×', long.capturePrefillRatio >= 0.85);
  row('capture on / off: decode (64; 3 each, in turns), tokens/s', `${long.captureDecodeRatio.toFixed(2)}×`, '≥ 0.85×', long.captureDecodeRatio >= 0.85);
  row('wasm heap, 1024-token prompt, capture on − off', `${long.captureHeapMB.toFixed(1)} MB`, '≤ 300 MB', long.captureHeapMB <= 300);
  row(`2 threads / 1 thread: prefill (${f(threads.two.prefill)} / ${f(threads.one.prefill)} tok/s)`,
      `${threads.prefillRatio.toFixed(2)}×`, '≥ 1.7×', threads.prefillRatio >= 1.7);
  row(`2 threads / 1 thread: decode (${f(threads.two.decode)} / ${f(threads.one.decode)} tok/s)`,
      `${threads.decodeRatio.toFixed(2)}×`, '≥ 1.4×', threads.decodeRatio >= 1.4);
  row('cached reload to the first generated token', `${(reload.firstTokenMs / 1000).toFixed(2)} s`, '≤ 1.5 s', reload.firstTokenMs <= 1500);
  const heap = results.browser[type]?.ours.heapMB;
  if (heap) {
    // GPT-2 small's KV cache at full context, at the engine's width (8 bits for Q8_0 and Q4_0).
    const { kvValueBytes: width, kvCache } = results.browser[type].ours;
    const kv = 2 * 12 * 1024 * 768 * width / 1e6;
    const bound = 1.25 * results.models[type].megabytes + kv;
    row(`wasm heap after load (file ${f(results.models[type].megabytes)} MB, ` +
        `${kvCache ?? (width === 2 ? 'f16' : 'f32')} KV cache ${f(kv)} MB)`,
        `${f(heap)} MB`, `≤ ${f(bound)} MB`, heap <= bound);
  }
}
console.log('\n' + lines.join('\n'));
console.log(`\n(${results.seconds.toFixed(0)} s; results in ${path.relative(kRoot, path.join(kBenchDir, 'results.json'))})`);
if (!flag('skip-profile') && !flag('skip-browser')) {
  // Issue 37: the page's prefill per kernel on whatever CPU this is, so a run on a new kind of
  // CPU says where its time went without another session.
  console.log('\nWhere the page\'s prefill goes, per kernel, in Chromium (scripts/bench-profile.mjs):');
  spawnSync(process.execPath, [path.join(kRoot, 'scripts/bench-profile.mjs'), '--top', '10'], {stdio: 'inherit'});
}
if (!flag('skip-ort') && !flag('skip-browser')) {
  console.log('\nONNX Runtime Web (scripts/bench-ort.mjs):');
  spawnSync(process.execPath, [path.join(kRoot, 'scripts/bench-ort.mjs'), '--runs', String(kRuns)], {stdio: 'inherit'});
}
if (!flag('skip-gradients')) {
  console.log('\nGradients (scripts/bench-gradients.mjs):');
  spawnSync(process.execPath, ['--no-experimental-fetch', path.join(kRoot, 'scripts/bench-gradients.mjs')],
            {stdio: 'inherit'});
}
if (!flag('skip-family')) {
  console.log('\nThe GPT-2 family (scripts/bench-family.mjs):');
  spawnSync(process.execPath, [path.join(kRoot, 'scripts/bench-family.mjs'),  // playwright-core needs Node's fetch
                               '--runs', String(Math.min(kRuns, 3))], {stdio: 'inherit'});
}
if (!flag('skip-sae')) {
  console.log('\nSparse autoencoders (scripts/bench-sae.mjs):');
  spawnSync(process.execPath, ['--no-experimental-fetch', path.join(kRoot, 'scripts/bench-sae.mjs'),
                               '--runs', String(Math.min(kRuns, 3))], {stdio: 'inherit'});
}
if (!flag('skip-graph')) {
  console.log('\nAttribution graphs (scripts/bench-graph.mjs):');
  spawnSync(process.execPath, ['--no-experimental-fetch', path.join(kRoot, 'scripts/bench-graph.mjs'),
                               '--runs', String(Math.min(kRuns, 3))], {stdio: 'inherit'});
  spawnSync(process.execPath, [path.join(kRoot, 'scripts/bench-graph-page.mjs')], {stdio: 'inherit'});
}
if (!flag('skip-dashboard')) {
  console.log('\nFeature dashboards (scripts/bench-dashboard.mjs):');
  spawnSync(process.execPath, [path.join(kRoot, 'scripts/bench-dashboard.mjs')], {stdio: 'inherit'});
  // The page's module at a fifth of the tokens (its prefill is ~4.5x native's; the features
  // phase is fixed work, so it weighs 5x more here than at 100 k: BENCHMARKS.md scales it).
  // Not every block's: the page's job writes every feature's JSON into the module's memory,
  // which for every block passes the module's 4 GB at these tokens (BENCHMARKS.md).
  spawnSync(process.execPath, ['--no-experimental-fetch', path.join(kRoot, 'scripts/bench-dashboard.mjs'), '--wasm',
                               '--tokens', '20000', '--only', 'graph,block'], {stdio: 'inherit'});
}
