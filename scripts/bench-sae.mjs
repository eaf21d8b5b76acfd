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

import {arg, benchModel, cpuTimed, engineFactory, loadEngine, median, printMachine} from './node-engine.mjs';

const kRuns = Number(arg('runs', '3'));
const kTokens = 64, kDIn = 768, kDSae = 24576, kLayer = 6;
const file = benchModel('gpt2');

// SAELens's safetensors: an 8-byte header length, the JSON header, the f32 data.
function saeSafetensors() {
  let state = 12345;
  const random = () => {  // a small LCG: the values only need to look like weights
    state = (state * 1103515245 + 12345) >>> 0;
    return state / 2 ** 32 - 0.5;
  };
  const shapes = {W_enc: [kDIn, kDSae], b_enc: [kDSae], W_dec: [kDSae, kDIn], b_dec: [kDIn]};
  const header = {};
  let offset = 0;
  for (const [name, shape] of Object.entries(shapes)) {
    const n = shape.reduce((a, b) => a * b, 1);
    header[name] = {dtype: 'F32', shape, data_offsets: [offset, offset + 4 * n]};
    offset += 4 * n;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - json.length % 8) % 8);
  const out = new Uint8Array(8 + json.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(new TextEncoder().encode(json), 8);
  const values = new Float32Array(out.buffer, 8 + json.length, offset / 4);
  const scale = 2 / Math.sqrt(kDIn);
  for (let i = 0; i < values.length; ++i) values[i] = random() * scale;
  // b_enc a little negative, so that a few percent of the features fire.
  const bEnc = new Float32Array(out.buffer, 8 + json.length + header.b_enc.data_offsets[0], kDSae);
  for (let i = 0; i < kDSae; ++i) bEnc[i] = -0.6 + 0.1 * random();
  return out;
}

printMachine();
const {Module, engine} = await loadEngine(engineFactory(), fs.readFileSync(file));

// Conversion in the page's way, the wasm heap measured before and after (memory never shrinks).
const weights = saeSafetensors();
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
