#!/usr/bin/env node
// Decode and prefill speed of our WebAssembly engine under Node (one thread, the same
// embind.cc + engine the page runs, built as build/wasm/web/gpt2-engine-node.cjs). The
// counterpart of scripts/bench-wllama.mjs for llama.cpp's wasm build; V8 runs the same wasm in
// Node and Chromium, so the figures are comparable up to the browser's own overhead.
//
//   node --no-experimental-fetch scripts/bench-wasm-node.mjs --model FILE.gguf
//        [--prompt 32] [--tokens 64] [--runs 3]
//
// Prompt and generated ids are fixed (no sampling cost, same work every run): the prompt is
// ids 1..prompt, each decode step feeds id 198 ("\n"). Prints tokens/s per run and the best,
// by wall clock and by this process's CPU time (user + system): on a shared machine the CPU-time
// figure is the steadier one, since time spent descheduled does not count.
import fs from 'node:fs';
import path from 'node:path';

import {arg, cpuMs, engineFactory, loadEngine} from './node-engine.mjs';

const model = arg('model', '');
const nPrompt = Number(arg('prompt', '32'));
const nTokens = Number(arg('tokens', '64'));
const runs = Number(arg('runs', '3'));
if (!model) {
  console.error('usage: node --no-experimental-fetch scripts/bench-wasm-node.mjs --model FILE.gguf');
  process.exit(2);
}

const {engine, info} = await loadEngine(engineFactory(), fs.readFileSync(model));
console.log(`model ${path.basename(model)}: ${info.n_layer} layers, n_embd ${info.n_embd}, ` +
            `${info.weight_type}, ${(info.file_bytes / 1e6).toFixed(1)} MB`);

const prompt = Array.from({length: nPrompt}, (_, i) => i + 1);
let bestDecode = 0, bestPrefill = 0, bestDecodeCpu = 0, bestPrefillCpu = 0;
for (let run = 0; run < runs; ++run) {
  engine.reset();
  let t0 = performance.now(), c0 = process.cpuUsage();
  engine.prefill(prompt);
  const prefillMs = performance.now() - t0, prefillCpu = cpuMs(process.cpuUsage(c0));
  t0 = performance.now();
  c0 = process.cpuUsage();
  for (let i = 0; i < nTokens; ++i) engine.step(198);
  const decodeMs = performance.now() - t0, decodeCpu = cpuMs(process.cpuUsage(c0));
  const decode = nTokens / (decodeMs / 1e3), prefill = nPrompt / (prefillMs / 1e3);
  const decodeC = nTokens / (decodeCpu / 1e3), prefillC = nPrompt / (prefillCpu / 1e3);
  bestDecode = Math.max(bestDecode, decode);
  bestPrefill = Math.max(bestPrefill, prefill);
  bestDecodeCpu = Math.max(bestDecodeCpu, decodeC);
  bestPrefillCpu = Math.max(bestPrefillCpu, prefillC);
  console.log(`run ${run + 1}: prefill ${nPrompt} tokens ${prefill.toFixed(1)} tok/s ` +
              `(${prefillC.toFixed(1)} per CPU s), decode ${nTokens} tokens ${decode.toFixed(1)} tok/s ` +
              `(${decodeC.toFixed(1)} per CPU s, ${(decodeCpu / nTokens).toFixed(2)} CPU ms/token)`);
}
console.log(`best: prefill ${bestPrefill.toFixed(1)} tok/s (${bestPrefillCpu.toFixed(1)} per CPU s), ` +
            `decode ${bestDecode.toFixed(1)} tok/s (${bestDecodeCpu.toFixed(1)} per CPU s)`);
engine.delete();
