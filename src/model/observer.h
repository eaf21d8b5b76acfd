// The activation observer: the forward pass reports named tensors to a callback, which is how
// the CLI's `inspect`, the page's visualisations and the golden tests all see inside the model.
// When no observer is set the forward pass does no extra work.
//
// Names and shapes, for a forward over T new tokens starting at position pos0 with
// n_keys = pos0 + T keys visible (C = n_embd, H = n_head, D = head_dim, F = n_ff, V = n_vocab):
//   per block (layer = 0..n_layer-1):
//     "ln1" [T, C]          LayerNorm 1 output
//     "q", "k", "v" [H, T, D]
//     "attn_scores" [H, T, n_keys]   q.k / sqrt(D); causally masked entries are -inf
//     "attn_probs"  [H, T, n_keys]   softmax of the scores (masked entries 0)
//     "attn_heads"  [T, C]  heads concatenated, before the output projection
//     "attn_out"    [T, C]  after the output projection (c_proj) with bias
//     "resid_attn"  [T, C]  residual stream after adding the attention output
//     "ln2" [T, C]
//     "mlp_pre" [T, F]      c_fc output, before GELU
//     "mlp_act" [T, F]      after GELU
//     "mlp_out" [T, C]      c_proj output with bias
//     "resid_out" [T, C]    residual stream after the block
//   after the blocks (layer = -1):
//     "embed" [T, C]        token + position embedding (the residual stream entering block 0)
//     "ln_f" [T, C]
//     "logits" [T, V]
#pragma once

#include <cstdint>
#include <functional>

namespace gpt2 {

struct Activation {
  const char* name;
  int layer;        // -1 for tensors outside the blocks
  int pos0;         // position of the first of the T rows
  int n_dims;
  int64_t shape[3];
  const float* data;  // valid only during the callback
};

using ActivationObserver = std::function<void(const Activation&)>;

}  // namespace gpt2
