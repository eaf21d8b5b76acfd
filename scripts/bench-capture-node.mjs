#!/usr/bin/env node
// What activation capture costs the page's engine on a long prompt (issue 10, "Capture on"):
// the wasm heap (HEAP8.buffer.byteLength, which never shrinks) and this process's CPU time for
// one prefill, capture off and capture on, each in a fresh module (a fresh heap). Node build of
// the page's engine (build/wasm/web/gpt2-engine-node.cjs), one thread.
//
//   node --no-experimental-fetch scripts/bench-capture-node.mjs --model FILE.gguf [--prompt 1024]
//        [--runs 2]
//
// The heap grows in steps (Emscripten over-allocates by up to 20 %, at most 96 MB), so the
// bytes malloc holds are printed too. The prompt is ids 1..prompt. After the capture-on prefill it also times what the views ask
// of the store: every block's attention row and MLP activations at the last position.
import fs from 'node:fs';

import {arg, cpuMs, engineFactory, loadEngine} from './node-engine.mjs';

const model = arg('model', '');
const nPrompt = Number(arg('prompt', '1024'));
const runs = Number(arg('runs', '2'));
if (!model) {
  console.error('usage: node --no-experimental-fetch scripts/bench-capture-node.mjs --model FILE.gguf');
  process.exit(2);
}
const create = engineFactory();
const bytes = fs.readFileSync(model);
const mb = (n) => (n / 1e6).toFixed(1);

async function run(capture) {
  const {Module, engine, info} = await loadEngine(create, bytes);
  const loaded = Module.HEAP8.buffer.byteLength;
  engine.reset();
  engine.setCapture(capture);
  const prompt = Int32Array.from({length: nPrompt}, (_, i) => i + 1);
  const c0 = process.cpuUsage();
  engine.prefill(prompt);
  const prefillCpu = cpuMs(process.cpuUsage(c0));
  const heap = Module.HEAP8.buffer.byteLength, malloc = Module.memoryStats().mallocBytes;
  let viewsMs = NaN, mapMs = NaN;
  if (capture) {
    const t0 = performance.now();
    for (let l = 0; l < info.n_layer; ++l) {
      engine.attention(l, nPrompt - 1).slice();
      engine.mlpActivations(l, nPrompt - 1).slice();
    }
    viewsMs = performance.now() - t0;
    // The attention view's [P, P] map of one head (web/worker/worker-jobs.js attentionMap).
    const t1 = performance.now();
    for (let q = 0; q < nPrompt; ++q) engine.headAttention(0, 0, q).slice();
    mapMs = performance.now() - t1;
  }
  engine.delete();
  return {loaded, heap, malloc, prefillCpu, viewsMs, mapMs};
}

for (let r = 0; r < runs; ++r) {
  const off = await run(false), on = await run(true);
  console.log(`run ${r + 1}: heap after load ${mb(off.loaded)} MB; after a ${nPrompt}-token prefill: ` +
              `capture off ${mb(off.heap)} MB, on ${mb(on.heap)} MB (+${mb(on.heap - off.heap)}; malloc'd +` +
              `${mb(on.malloc - off.malloc)}, ${mb(on.malloc)} MB in all); ` +
              `prefill CPU s off ${(off.prefillCpu / 1e3).toFixed(2)}, on ${(on.prefillCpu / 1e3).toFixed(2)} ` +
              `(+${((on.prefillCpu / off.prefillCpu - 1) * 100).toFixed(1)} %); ` +
              `every block's attention + MLP row at the last position ${on.viewsMs.toFixed(1)} ms, ` +
              `block 0's attention rows of every position ${on.mapMs.toFixed(0)} ms`);
}
