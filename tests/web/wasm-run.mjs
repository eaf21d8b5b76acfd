// Runs the page's engine under Node (build/wasm/web/gpt2-engine-node.cjs) on its plain SIMD128
// module or its relaxed SIMD twin, for reproducible.test.mjs, which needs both in one test and
// Node 20 has relaxed SIMD only behind a flag given at start:
//   node [--experimental-wasm-relaxed-simd] tests/web/wasm-run.mjs \
//     MODEL plain|relaxed OUT_PREFIX '{"prompt": ..., "sampling": {temperature, topK, topP, seed}, "n": N}'
// Generates N tokens one call at a time (prefill, then sample and step, as the lab's generation
// does) with the activations captured, then writes OUT_PREFIX.json ({prompt ids, sampled ids,
// simd}) and OUT_PREFIX.f32: for every position p of prompt + sampled tokens, the log-probability
// of every token following p, as Float32 rows of n_vocab (finalProbs: the final LayerNorm and
// unembedding of the captured stream, the logits the step sampled from; their log equals
// logProbs's, which costs a pass over the vocabulary per id, to 6e-8 on the top 64).
import fs from 'node:fs';
import {nodeModule} from './node-engine.mjs';

const [model, variant, outPrefix, requestJson] = process.argv.slice(2);
if (!requestJson || !['plain', 'relaxed'].includes(variant)) {
  console.error('usage: wasm-run.mjs MODEL plain|relaxed OUT_PREFIX REQUEST_JSON');
  process.exit(2);
}
const request = JSON.parse(requestJson);
const Module = await nodeModule(variant === 'relaxed' ? '-relaxed' : '');
const engine = new Module.Engine();
const bytes = fs.readFileSync(model);
engine.beginLoad(bytes.length);
engine.appendChunk(bytes);
const info = engine.finishLoad(1);

const s = request.sampling;
engine.reset();
engine.setCapture(true);
engine.setSampling({temperature: s.temperature, topK: s.topK, topP: s.topP, seed: s.seed});
const promptIds = Array.from(engine.tokenize(request.prompt));
engine.prefill(promptIds);
const ids = [];
for (let i = 0; i < request.n; ++i) {
  const id = engine.sample();
  ids.push(id);
  engine.step(id);
  if (id === Module.endOfTextId()) break;
}
const positions = engine.capturedPositions();
const rows = new Float32Array(positions * info.n_vocab);
for (let p = 0; p < positions; ++p) {
  const row = rows.subarray(p * info.n_vocab, (p + 1) * info.n_vocab);
  engine.finalProbs(p).forEach((x, i) => { row[i] = Math.log(x); });
}
fs.writeFileSync(`${outPrefix}.f32`, rows);
fs.writeFileSync(`${outPrefix}.json`, JSON.stringify({promptIds, ids, simd: info.simd, nVocab: info.n_vocab}));
