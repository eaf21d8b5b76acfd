#!/usr/bin/env node
// Where the page's prefill time goes, per kernel, in headless Chromium: the page's module with
// its function names kept (build/wasm/web/gpt2-engine-named.wasm and -relaxed-named.wasm,
// written by scripts/relax-wasm.mjs --named; the same code as the site's), one thread, a
// GPT-2-small-shaped model per weight type, N prefills of a 128-token prompt under V8's
// sampling profiler (over CDP). Prints for each weight type and build (plain SIMD128, relaxed):
//   tokens/s without the profiler and with it (how much the profiler itself moves),
//   each function's share of the samples (self time), and the same split by the forward step
//   it ran under (Session::AttentionStep, MlpStep, ...), which tells the shapes apart: the
//   attention step's products are QKV (768 x 2304) and its projection (768 x 768), the MLP's
//   are 768 x 3072 and 3072 x 768.
//
//   node scripts/bench-profile.mjs [--types q8_0,f32] [--builds plain,relaxed] [--prefills 10]
//                                  [--prompt-tokens 128] [--interval-us 100] [--top 15]
//                                  [--capture] [--out build/bench/profile]
// --capture profiles prefills with activation capture on (the page's default), to see what
// recording every block's insides costs.
// --out keeps each .cpuprofile (Chrome DevTools' Performance panel opens them).
// Needs `bash scripts/build.sh` first.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import * as H from '../tests/web/wllama-harness.mjs';
import * as Ours from './bench-ours.mjs';
import { benchModel, printMachine } from './node-engine.mjs';

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}
const kRoot = H.repoRoot;
const kTypes = arg('types', 'q8_0,f32').split(',');
const kBuilds = arg('builds', 'plain,relaxed').split(',');
const kPrefills = Number(arg('prefills', '10'));
const kCapture = process.argv.includes('--capture');
const kPromptTokens = Number(arg('prompt-tokens', '128'));
const kIntervalUs = Number(arg('interval-us', '100'));
const kTop = Number(arg('top', '15'));
const kOut = path.resolve(kRoot, arg('out', 'build/bench/profile'));
const kEngine = 'build/wasm/web/gpt2-engine.js';
const kSuffix = { plain: '-named', relaxed: '-relaxed-named' };

for (const b of kBuilds) {
  if (!kSuffix[b]) throw new Error(`--builds: ${b} is not plain or relaxed`);
  const wasm = path.join(kRoot, kEngine.replace(/\.js$/, `${kSuffix[b]}.wasm`));
  if (!fs.existsSync(wasm)) {
    console.error(`bench-profile: ${path.relative(kRoot, wasm)} is missing; run: bash scripts/build.sh`);
    process.exit(1);
  }
}

const promptText = Ours.repeatedPrompt(kPromptTokens);

// Self time per function, and per (forward step, function): a sample's step is the nearest
// caller named gpt2::Session::*Step (or "other").
function shares(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children || []) parent.set(c, n.id);
  const stepOf = new Map();
  const step = (id) => {
    if (stepOf.has(id)) return stepOf.get(id);
    const name = byId.get(id).callFrame.functionName;
    const m = /gpt2::Session::(\w+Step)\(/.exec(name);
    const s = m ? m[1] : parent.has(id) ? step(parent.get(id)) : 'other';
    stepOf.set(id, s);
    return s;
  };
  const self = new Map(), inStep = new Map();
  let total = 0;
  const add = (map, k, dt) => map.set(k, (map.get(k) || 0) + dt);
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i];
    const name = short(byId.get(id).callFrame.functionName || '(anonymous)');
    if (name === '(idle)') return;
    add(self, name, dt);
    add(inStep, `${step(id)}: ${name}`, dt);
    total += dt;
  });
  const top = (map) => [...map].sort((a, b) => b[1] - a[1]).slice(0, kTop)
      .map(([k, v]) => ({ name: k, share: v / total }));
  return { self: top(self), byStep: top(inStep), ms: total / 1e3 };
}

// A C++ name without its parameter list and namespaces' noise, so rows stay one line.
function short(name) {
  let depth = 0, end = name.length;
  for (let i = 0; i < name.length; ++i) {  // cut at the first '(' outside template brackets
    if (name[i] === '<') depth++;
    else if (name[i] === '>') depth--;
    else if (name[i] === '(' && depth === 0 && i > 0) { end = i; break; }
  }
  return name.slice(0, end).replace(/^(void|auto) /, '').replace(/gpt2::(N_WASM::)?/g, '')
      .replace(/\(anonymous namespace\)::/g, '').slice(0, 90);
}

const pct = (x) => `${(100 * x).toFixed(1).padStart(5)} %`;
const median = Ours.median;
printMachine();
fs.mkdirSync(kOut, { recursive: true });
const served = Object.fromEntries(kTypes.map((t) => [`/__model/${t}.gguf`, benchModel('gpt2', t)]));
const { server, origin } = await H.startServer(served);
const browser = await H.launchChromium();
const results = [];
try {
  for (const type of kTypes) {
    for (const build of kBuilds) {
      const page = await browser.context.newPage();
      const errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      try {
        await page.goto(origin + '/');
        const loaded = await page.evaluate(Ours.loadEngines, { engineUrl: '/' + kEngine,
          modelUrl: `/__model/${type}.gguf`, promptText, threads: [1], wasmSuffix: kSuffix[build] });
        const browserName = /(?:Headless)?Chrome\/[\d.]+/.exec(loaded.userAgent)?.[0];
        await page.evaluate(Ours.timedPrefills, { n: 2, tokens: kPromptTokens, capture: kCapture });  // V8 tiers up
        const plainMs = (await page.evaluate(Ours.timedPrefills, { n: kPrefills, tokens: kPromptTokens, capture: kCapture })).ms;
        const cdp = await page.context().newCDPSession(page);
        await cdp.send('Profiler.enable');
        await cdp.send('Profiler.setSamplingInterval', { interval: kIntervalUs });
        await cdp.send('Profiler.start');
        const profiledMs = (await page.evaluate(Ours.timedPrefills, { n: kPrefills, tokens: kPromptTokens, capture: kCapture })).ms;
        const { profile } = await cdp.send('Profiler.stop');
        await cdp.detach();
        const file = path.join(kOut, `prefill-${type}-${build}${kCapture ? '-capture' : ''}.cpuprofile`);
        fs.writeFileSync(file, JSON.stringify(profile));
        const tps = (ms) => kPromptTokens / (median(ms) / 1e3);
        const s = shares(profile);
        const r = { type, build, capture: kCapture, browser: browserName, simd: loaded.info.simd, int8Prefill: loaded.info.int8_prefill,
                    tokensPerSecond: tps(plainMs), profiledTokensPerSecond: tps(profiledMs), ...s };
        results.push(r);
        console.log(`\n${type}, ${build}${kCapture ? ', capture on' : ''} (${r.simd}; int8 prefill ${r.int8Prefill}), ${browserName}, one thread: ` +
          `prefill ${r.tokensPerSecond.toFixed(1)} tok/s, ${r.profiledTokensPerSecond.toFixed(1)} under the profiler ` +
          `(${kPrefills} prefills of ${kPromptTokens} tokens, ${(s.ms / 1e3).toFixed(1)} s sampled every ${kIntervalUs} us; ` +
          `${path.relative(kRoot, file)})`);
        console.log('  self time by function:');
        for (const x of s.self) console.log(`  ${pct(x.share)}  ${x.name}`);
        console.log('  by forward step:');
        for (const x of s.byStep) console.log(`  ${pct(x.share)}  ${x.name}`);
      } catch (e) {
        throw new Error(`${type} ${build}: ${e.message}\n${errors.join('\n')}`);
      } finally {
        await page.close();
      }
    }
  }
} finally {
  await browser.close();
  server.close();
}
fs.writeFileSync(path.join(kOut, 'results.json'), JSON.stringify({ date: new Date().toISOString(),
  load: os.loadavg(), results }, null, 2) + '\n');
