// The anatomy numbers (web/page/anatomy.js) against the seeds' formulas for GPT-2 small's shape,
// and against the engine's own count of the tensors in a model file (in the page).
import assert from 'node:assert/strict';
import {test} from 'node:test';
import {anatomy} from '../../web/page/anatomy.js';

const kGpt2Small = {n_embd: 768, n_ff: 3072, n_layer: 12, n_head: 12, n_vocab: 50257, n_ctx: 1024};

test('GPT-2 small: 7,087,872 parameters per block and 124,439,808 in all', () => {
  const d = 768;
  const a = anatomy(kGpt2Small, 32);
  assert.equal(a.attention, 4 * d * d + 4 * d);
  assert.equal(a.mlp, 8 * d * d + 5 * d);
  assert.equal(a.layerNorms, 4 * d);
  assert.equal(a.block, 12 * d * d + 13 * d);
  assert.equal(a.block, 7_087_872);
  // The published size of the 124M checkpoint (Hugging Face gpt2, tied unembedding).
  assert.equal(a.total, 124_439_808);
});

test('GPT-2 small: forward FLOPs, the s² crossover and the KV cache', () => {
  const d = 768, L = 12;
  for (const s of [1, 32, 1024]) {
    const a = anatomy(kGpt2Small, s);
    assert.equal(a.flopsPerLayer, 24 * s * d * d + 4 * s * s * d);
    assert.equal(a.flops, L * (24 * s * d * d + 4 * s * s * d));
    assert.equal(a.kvBytes, 2 * L * s * d * 4);
  }
  const a = anatomy(kGpt2Small, 6 * d);
  assert.equal(a.crossover, 6 * d);
  assert.equal(a.attentionFlops, a.matmulFlops, 'at s = 6d the two terms are equal');
  assert.equal(anatomy(kGpt2Small, 1).kvBytesFull, 2 * L * 1024 * d * 4);
  // A quantized model's f16 cache: half the bytes (llama.cpp's f16 default: 36 KB a token for
  // GPT-2 small).
  const half = anatomy({...kGpt2Small, kv_value_bytes: 2}, 1024);
  assert.equal(half.kvBytesPerToken, 36_864);
  assert.equal(half.kvBytesFull, 2 * L * 1024 * d * 2);
});
