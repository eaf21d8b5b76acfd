#!/usr/bin/env node
// Attribution graphs' costs (issue 36, "Tests and speed"): a GPT-2-small-shaped Q8_0 model with
// random weights and random transcoders of the public set's shape for all 12 blocks (24,576
// features, the layout of jacobdunefsky/gpt2small-transcoders: one folder per block with sae.json
// and an f32 sae.safetensors, 151 MB each), converted to Q8_0 by gpt2-convert --transcoders.
// A 16-token prompt (the graph's ids are [50256] + those 16), default pruning, at most 1,000
// feature nodes, 1 thread:
//   the graph's build, in prefills of the 16 prompt tokens                       target <= 40
//   extra memory with all 12 transcoders loaded and the graph built              target <= 700 MB
//   (and, wasm, one QK attribution on the graph: a click in the page)
// Native: `gpt2 graph` (its "built in" line) against `gpt2 bench --prompt-tokens 16` (best of 3),
// memory as the peak RSS of `gpt2 graph` less that of `gpt2 bench` on the same model.
// WebAssembly: the page's module under Node (scripts/node-engine.mjs; --relaxed for its relaxed
// SIMD twin), the graph as the page's worker runs it (startGraph, continueGraph until done), in
// prefills of the same 16 tokens timed in the same module, and the longest continueGraph call:
// the worker answers the page (a cancel, a click that needs the engine) between calls, so that is
// the longest a click waits while a graph computes. Memory: the module's heap after the graph
// less its heap with the model loaded alone.
//
// The random encoders' b_enc (about -1.6 against pre-activations of standard deviation 0.58) makes
// about 0.3 % of the features fire, some 70 a token: the order of the real transcoders' L0, which
// sets the graph's columns (every active feature) and so its cost.
//
//   node --no-experimental-fetch scripts/bench-graph.mjs [--runs 3]
import {execFileSync, spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import {arg, benchModel, benchTranscoders, engineFactory, loadEngine, median, printMachine, repoRoot} from './node-engine.mjs';

const kRuns = Number(arg('runs', '3'));
const kDIn = 768, kDSae = 24576, kLayers = 12, kMaxFeatureNodes = 1000;
// 16 tokens in GPT-2's vocabulary (checked below).
const kPrompt = 'When Mary and John went to the store, John gave a drink to Mary because';
const dir = path.join(repoRoot, 'build/bench/graph');
const gpt2 = path.join(repoRoot, 'build/native/gpt2');
const model = benchModel('gpt2');

const tcFile = benchTranscoders();

printMachine();
const ids = execFileSync(gpt2, ['tokenize', '--model', model, '--text', kPrompt], {encoding: 'utf8'})
                .trim().split(/\s+/).map(Number);
if (ids.length !== 16) throw new Error(`the prompt is ${ids.length} tokens, not 16`);

// A native command's stdout and peak RSS in MB (GNU time's %M, in KB, on stderr's last line).
function runNative(args) {
  const r = spawnSync('/usr/bin/time', ['-f', '%M', gpt2, ...args], {encoding: 'utf8'});
  if (r.status !== 0) throw new Error(`gpt2 ${args[0]} failed: ${r.stderr}`);
  const lines = r.stderr.trim().split('\n');
  return {stdout: r.stdout, rssMb: Number(lines[lines.length - 1]) / 1024};
}

{
  const bench = runNative(['bench', '--model', model, '--prompt-tokens', '16', '--decode-tokens', '1', '--threads', '1']);
  const prefillS = Number(/prefill: 16 tokens in ([0-9.]+) s/.exec(bench.stdout)[1]);
  const builds = [];
  let graph;
  for (let r = 0; r < kRuns; ++r) {
    graph = runNative(['graph', '--model', model, '--transcoders', tcFile, '--prompt', kPrompt, '--threads', '1',
                       '--max-feature-nodes', String(kMaxFeatureNodes)]);
    builds.push(Number(/built in ([0-9.]+) ms/.exec(graph.stdout)[1]));
  }
  const first = graph.stdout.split('\n')[0];
  const build = median(builds);
  console.log(`native, 1 thread: ${first}`);
  console.log(`native graph: ${build.toFixed(0)} ms (runs ${builds.map((x) => x.toFixed(0)).join(', ')}) = ` +
              `${(build / (1000 * prefillS)).toFixed(1)} prefills of 16 tokens (${(1000 * prefillS).toFixed(1)} ms; target <= 40)`);
  console.log(`native extra memory: peak RSS ${graph.rssMb.toFixed(0)} MB - ${bench.rssMb.toFixed(0)} MB (the model's bench) = ` +
              `${(graph.rssMb - bench.rssMb).toFixed(0)} MB (target <= 700 MB; the Q8_0 transcoders are ` +
              `${(fs.statSync(tcFile).size / 1e6).toFixed(0)} MB)`);
}

if (!process.argv.includes('--skip-wasm')) {
  const {Module, engine} = await loadEngine(engineFactory(), fs.readFileSync(model));
  const heapModel = Module.memoryStats().heapBytes;
  const time = (f) => {
    const t0 = performance.now();
    const r = f();
    return {ms: performance.now() - t0, r};
  };
  engine.setCapture(false);
  const prefills = [];
  for (let r = 0; r < 5; ++r) {
    engine.reset();
    prefills.push(time(() => engine.prefill(ids)).ms);
  }
  const prefill = median(prefills);
  engine.loadTranscoders(fs.readFileSync(tcFile));
  const builds = [], longest = [];
  for (let r = 0; r < kRuns; ++r) {
    let calls = 0, worst = 0;
    const {ms} = time(() => {
      const start = time(() => engine.startGraph(ids, {maxFeatureNodes: kMaxFeatureNodes}));
      worst = start.ms;  // the real run, before the first continueGraph
      if (r === 0) console.log(`wasm startGraph: ${start.ms.toFixed(0)} ms`);
      for (let p = start.r; !p.finished; ++calls) {
        const c = time(() => engine.continueGraph());
        if (r === 0 && c.ms > 100) console.log(`wasm continueGraph ${calls}: ${c.ms.toFixed(0)} ms (${JSON.stringify(c.r)})`);
        p = c.r;
        worst = Math.max(worst, c.ms);
      }
    });
    builds.push(ms);
    longest.push(worst);
    if (r === 0) console.log(`wasm: ${calls} continueGraph calls`);
  }
  const build = median(builds);
  const simd = process.argv.includes('--relaxed') ? 'relaxed SIMD' : 'SIMD128';
  console.log(`wasm (${simd}) graph: ${build.toFixed(0)} ms (runs ${builds.map((x) => x.toFixed(0)).join(', ')}) = ` +
              `${(build / prefill).toFixed(1)} prefills of 16 tokens (${prefill.toFixed(1)} ms; target <= 40)`);
  console.log(`wasm longest continueGraph call (or startGraph: a click's wait while it computes): ${median(longest).toFixed(0)} ms ` +
              `(runs ${longest.map((x) => x.toFixed(0)).join(', ')}; target <= 100 ms)`);
  // QK attribution on the graph (src/graph/qk.h): the top block has the most parts (11 blocks below it).
  const qk = [];
  for (let r = 0; r < kRuns; ++r) qk.push(time(() => engine.graphQk(kLayers - 1, 0, ids.length, 1, 12)).ms);
  console.log(`wasm QK attribution of block ${kLayers - 1}'s head 0 (last position to position 1): ` +
              `${median(qk).toFixed(0)} ms (runs ${qk.map((x) => x.toFixed(0)).join(', ')}) = ` +
              `${(median(qk) / prefill).toFixed(1)} prefills`);
  console.log(`wasm extra memory: heap ${(Module.memoryStats().heapBytes / 1e6).toFixed(0)} MB - ` +
              `${(heapModel / 1e6).toFixed(0)} MB with the model alone = ` +
              `${((Module.memoryStats().heapBytes - heapModel) / 1e6).toFixed(0)} MB (target <= 700 MB)`);
}
