// The model's anatomy computed from its shape (never hard-coded): parameters per block and in
// total, forward FLOPs for a prompt length, where attention's s² term takes over, KV cache
// bytes. d = n_embd, f = n_ff (4d in GPT-2), L = n_layer, V = n_vocab, s = tokens.
//   attention: W_qkv d·3d + b 3d, W_o d·d + b d          = 4d² + 4d
//   MLP:       W_fc d·f + b f, W_proj f·d + b d          = 2df + f + d   (8d² + 5d when f = 4d)
//   LayerNorms: ln_1 and ln_2, a gain and a bias each     = 4d
//   per layer forward FLOPs (a multiply-add is 2): matmuls 2s(4d² + 2df) (24sd² when f = 4d),
//   attention scores and mixing 2·s²·d each              = 4s²d
//   the s² term overtakes the s term at s = 2d + f       (6d when f = 4d)
// The KV cache holds keys and values of every block for every position: kv_value_bytes each
// (the engine's info: 4 for F32 models, 2 for the f16 cache of F16 models, 1.0625 for the 8-bit
// cache of Q8_0 and Q4_0 models with GPT-2's head size, where 32 quants share an f16 scale; 4 if
// absent).
export function anatomy(config, s) {
  const {n_embd: d, n_ff: f, n_layer: L, n_vocab: V, n_ctx: ctx} = config;
  const kv = config.kv_value_bytes ?? 4;
  const attention = 4 * d * d + 4 * d;
  const mlp = 2 * d * f + f + d;
  const layerNorms = 4 * d;
  const block = attention + mlp + layerNorms;
  const embeddings = V * d + ctx * d;  // token and position embeddings (the unembedding is tied)
  const finalNorm = 2 * d;
  const matmulFlops = 2 * s * (4 * d * d + 2 * d * f);
  const attentionFlops = 4 * s * s * d;
  return {
    attention, mlp, layerNorms, block, blocks: L * block, embeddings, finalNorm,
    total: L * block + embeddings + finalNorm,
    tokens: s,
    flopsPerLayer: matmulFlops + attentionFlops, matmulFlops, attentionFlops,
    flops: L * (matmulFlops + attentionFlops),
    unembedFlops: 2 * s * d * V,
    crossover: 2 * d + f,
    kvValueBytes: kv,
    kvBytesPerToken: 2 * L * d * kv,
    kvBytes: 2 * L * s * d * kv,
    kvBytesFull: 2 * L * ctx * d * kv,
  };
}
