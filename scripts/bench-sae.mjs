#!/usr/bin/env node
// Sparse autoencoders' costs (issue 27), measured as bench-circuits.mjs measures the circuits lab:
// our wasm engine under Node, one thread (the page's module), a GPT-2-small-shaped Q8_0 file, and
// an SAE of GPT-2 small's shape (d_in 768, 24,576 features, standard, blocks.6.hook_resid_pre)
// with random f32 weights in SAELens's safetensors layout (151 MB), converted to Q8_0 by the
// page's Converter binding. By CPU time (user + system).
//   encoding the SAE over a 64-token prompt, over that prompt's prefill          target <= 30 %
//   a steered re-run (one feature added at the SAE's hook), in prefills          target <= 1
//   wasm heap growth while converting the 151 MB f32 SAE (beside the model)      target <= 300 MB
//
//   node --no-experimental-fetch scripts/bench-sae.mjs [--runs 3]
import fs from 'node:fs';

import {arg, benchModel, cpuTimed, engineFactory, loadEngine, median, printMachine, randomSaeSafetensors} from './node-engine.mjs';

const kRuns = Number(arg('runs', '3'));
const kTokens = 64, kDIn = 768, kDSae = 24576, kLayer = 6;
const file = benchModel('gpt2');

printMachine();
const {Module, engine} = await loadEngine(engineFactory(), fs.readFileSync(file));

// Conversion in the page's way, the wasm heap measured before and after (memory never shrinks).
const weights = randomSaeSafetensors({dIn: kDIn, dSae: kDSae, seed: 12345, encBias: -0.6});
const heap0 = Module.memoryStats().heapBytes;
const conversion = cpuTimed(() => {
  const c = new Module.Converter();
  c.setSaeConfig(JSON.stringify({architecture: 'standard', d_in: kDIn, d_sae: kDSae, apply_b_dec_to_input: true,
                                 normalize_activations: 'none', hook_name: `blocks.${kLayer}.hook_resid_pre`}));
  c.beginCheckpoint(weights.length);
  const kChunk = 16 << 20;
  for (let i = 0; i < weights.length; i += kChunk) c.appendChunk(weights.subarray(i, i + kChunk));
  const {tensors} = c.planSae('q8_0');
  let done = 0;
  while (done < tensors) done = c.convertNext();
  const gguf = c.takeOutput();
  c.delete();
  return gguf;
});
const gguf = conversion.r;
const heap1 = Module.memoryStats().heapBytes;
const sae = engine.loadSae(gguf);
console.log(`converting the ${(weights.length / 1e6).toFixed(0)} MB f32 SAE to Q8_0 (${(gguf.length / 1e6).toFixed(0)} MB): ` +
            `${conversion.ms.toFixed(0)} CPU ms, wasm heap +${((heap1 - heap0) / 1e6).toFixed(0)} MB (target <= 300 MB)`);

const ids = Array.from({length: kTokens}, (_, i) => 1000 + 37 * i);
const prefill = median(Array.from({length: kRuns + 1}, () => {
  engine.setInterventions({});
  engine.reset();
  engine.setCapture(false);
  return cpuTimed(() => engine.prefill(ids)).ms;
}).slice(1));

// Encoding: the first read of a fresh capture encodes every position (later reads of the same
// stream reuse it, so each run starts with another token and no row is the same).
let fired = 0;
const encode = median(Array.from({length: kRuns}, (_, run) => {
  engine.reset();
  engine.setCapture(true);
  engine.prefill([500 + run, ...ids.slice(1)]);
  return cpuTimed(() => {
    fired = engine.saeFeatures(sae.id, kTokens - 1, kDSae).features.length;
  }).ms;
}));
console.log(`encoding the SAE over ${kTokens} tokens: ${encode.toFixed(0)} CPU ms = ${(100 * encode / prefill).toFixed(0)} % ` +
            `of the prefill (${prefill.toFixed(0)} ms; ${fired} features fire at the last position; target <= 30 %)`);

// A steered re-run of the captured conversation: from the SAE's block on, with the edit.
const steered = median(Array.from({length: kRuns}, () => {
  engine.setInterventions({});
  engine.reset();
  engine.setCapture(true);
  engine.prefill(ids);
  engine.setInterventions({sae: [{id: sae.id, steer: [[123, 8]]}]});
  return cpuTimed(() => engine.rerun()).ms;
}));
console.log(`a steered re-run (block ${kLayer} on) of ${kTokens} tokens, capture on: ${steered.toFixed(0)} CPU ms = ` +
            `${(steered / prefill).toFixed(2)} prefills (target <= 1)`);
// What a token pick asks for the features view: the top 10 features' logit weights (W_dec[F] @
// W_U, the top 5 each way), in one product, against one product a feature.
const top = Array.from(engine.saeFeatures(sae.id, kTokens - 1, 10).features);
const batched = median(Array.from({length: kRuns}, () => cpuTimed(() => engine.saeLogitWeights(sae.id, top, 5)).ms));
const single = median(Array.from({length: kRuns}, () => cpuTimed(() => top.forEach((f) => engine.saeLogitWeights(sae.id, [f], 5))).ms));
console.log(`the logit weights of a token's top ${top.length} features: ${batched.toFixed(1)} CPU ms in one product, ` +
            `${single.toFixed(1)} ms one product a feature (${(single / batched).toFixed(1)}x)`);
engine.delete();
