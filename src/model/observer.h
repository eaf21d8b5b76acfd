// The activation observer: the forward pass reports named tensors to a callback, which is how
// the CLI's `inspect`, the page's visualisations and the golden tests all see inside the model.
// When no observer is set the forward pass does no extra work.
//
// Observers are passed per call in RunOptions (model/run_options.h). What a run leaves is kept
// by one of three: the record of one call (model/acts.h: the analyses' typed tensors, kept as
// asked), the page's capture store across prefill and steps (model/capture.h CaptureStore), or
// a log of every report as made (capture.h Recorder: `inspect --json`, the tests).
//
// Names (hooks.h: the enum a consumer switches on, our name and TransformerLens's) and shapes, for
// a forward over T new tokens starting at position pos0 with n_keys = pos0 + T keys visible (C =
// n_embd, H = n_head, D = head_dim, F = n_ff, V = n_vocab), with the TransformerLens hook each one
// equals (the page and the golden files use our names):
//   per block (layer = l = 0..n_layer-1):
//     "resid_pre" [T, C]    the stream entering the block, after its patches and stream edits
//                                                         blocks.l.hook_resid_pre
//     "ln1" [T, C]          LayerNorm 1 output            blocks.l.ln1.hook_normalized
//     "q", "k", "v" [H, T, D]                             blocks.l.attn.hook_q/k/v (as [T, H, D])
//     "attn_scores" [H, T, n_keys]   q.k / sqrt(D); causally masked entries are -inf
//                                                         blocks.l.attn.hook_attn_scores
//     "attn_probs"  [H, T, n_keys]   softmax of the scores (masked entries 0)
//                                                         blocks.l.attn.hook_pattern
//     "attn_heads"  [T, C]  heads concatenated, before the output projection
//                                                         blocks.l.attn.hook_z (flattened)
//     "attn_out"    [T, C]  after the output projection (c_proj) with bias
//                                                         blocks.l.hook_attn_out
//     "resid_attn"  [T, C]  residual stream after adding the attention output
//                                                         blocks.l.hook_resid_mid
//     "ln2" [T, C]                                        blocks.l.ln2.hook_normalized
//     "mlp_pre" [T, F]      c_fc output, before GELU      blocks.l.mlp.hook_pre
//     "mlp_act" [T, F]      after GELU                    blocks.l.mlp.hook_post
//     "mlp_out" [T, C]      c_proj output with bias       blocks.l.hook_mlp_out
//     "resid_out" [T, C]    residual stream after the block
//                                                         blocks.l.hook_resid_post
//   after the blocks (layer = -1):
//     "embed" [T, C]        token + position embedding (the residual stream entering block 0)
//                                                         hook_embed + hook_pos_embed
//                                                         (= blocks.0.hook_resid_pre)
//     "ln_f" [T, C]                                       ln_final.hook_normalized
//     "logits" [T, V]                                     the model's output logits
// Under interventions the tensors are the broken model's: ablated heads are zero (or their
// mean) in "attn_heads"; under post-norm "ln1"/"ln2" are the sublayers' inputs (the raw stream)
// and "resid_attn"/"resid_out" the normalised stream; a skipped sublayer is still computed and
// reported, only not added. A block whose attention is frozen (path patching) attends nothing:
// it reports no "attn_scores" or "attn_probs", "ln1", "q", "k" and "v" only if it was asked to
// compute them (FrozenAttention::inputs), and its "attn_heads" are the given ones.
#pragma once

#include <cstdint>
#include <functional>

#include "model/hooks.h"

namespace gpt2 {

struct Activation {
  Hook hook;
  const char* name;  // HookName(hook)
  int layer;         // -1 for tensors outside the blocks
  int pos0;          // position of the first of the T rows
  int n_dims;
  int64_t shape[3];
  const float* data;  // valid only during the callback
};

using ActivationObserver = std::function<void(const Activation&)>;

// Reports data [d0, d1] (d2 > 0: [d0, d1, d2]) as `hook` of `layer`, its rows from pos0.
inline void Report(const ActivationObserver& observer, Hook hook, int layer, int pos0,
                   const float* data, int64_t d0, int64_t d1, int64_t d2 = 0) {
  Activation a;
  a.hook = hook;
  a.name = HookName(hook);
  a.layer = layer;
  a.pos0 = pos0;
  a.n_dims = d2 ? 3 : 2;
  a.shape[0] = d0;
  a.shape[1] = d1;
  a.shape[2] = d2;
  a.data = data;
  observer(a);
}

}  // namespace gpt2
