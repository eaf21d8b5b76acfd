// Per-call settings of a forward pass (as gemma.cpp passes a RuntimeConfig with each Generate
// call): what to observe and how to break the model. Nothing here is session state; a default
// RunOptions is the plain GPT-2 forward pass at no extra cost.
//
// Interventions, applied at the named steps of Session::Prefill (see model.h):
//   ablate heads  L.H: the head's slice of "attn_heads" (its output before the output projection,
//                 TransformerLens blocks.L.attn.hook_z[:, H]) is replaced by zero, or by
//                 head_means (mean ablation: typically its mean over a clean run's positions,
//                 see HeadMeans in model/capture.h).
//   skip attn L / skip mlp L: the sublayer is computed (so its insides stay observable) but its
//                 output is not added: the stream passes that step unchanged.
//   no residual L: x = attn(ln_1(x)); x = mlp(ln_2(x)): the sublayer outputs replace the stream.
//   post-norm:    every block is x = ln_1(x + attn(x)); x = ln_2(x + mlp(x)) with the same
//                 weights (the original Transformer's arrangement), then ln_f as usual.
//                 Combined with no residual: x = ln_1(attn(x)); with skip: the step (add and
//                 norm) is left out.
//   patch:        the residual stream entering block L (TransformerLens blocks.L.hook_resid_pre)
//                 at an absolute position is replaced by a recorded vector (activation patching).
//   head patch:   one head's output (hook_z[:, H], before ablation) or input (hook_q/k/v[:, H],
//                 right after the qkv product, so a patched key or value is also what the KV
//                 cache stores) is replaced by given values at some absolute positions (path
//                 patching's senders and receivers; ablation is the constant case).
//   frozen attn:  block L's attention is not computed: every head's output (hook_z) is given,
//                 then projected as usual (path patching's "every other head frozen at its clean
//                 value"). Such a block neither reads nor writes the KV cache, and runs ln_1 and
//                 the qkv product only if asked (`inputs`) for an observer; the given rows must
//                 cover every row run.
//   stream edit:  a function rewrites the rows of one block's tensor at a stream point
//                 (TransformerLens blocks.L.hook_resid_pre, hook_attn_out, hook_resid_mid,
//                 hook_mlp_out, hook_resid_post) before the model uses them, as a TransformerLens
//                 hook returning a new value: resid_pre after the patches, attn_out and mlp_out
//                 before their add, resid_mid and resid_post after it; the observer reports the
//                 edited tensor. The model knows nothing of what edits it (the SAE's steering and
//                 clamping, src/sae/sae.h, are such functions).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/observer.h"

namespace gpt2 {

struct HeadRef {
  int layer;
  int head;
};

struct ResidPatch {
  int layer;                 // the stream entering this block
  int position;              // absolute position
  std::vector<float> value;  // [n_embd]
};

// Which of a head's tensors a HeadPatch replaces (TransformerLens blocks.L.attn.hook_z, hook_q,
// hook_k, hook_v at head H).
enum class HeadPart { kOutput, kQuery, kKey, kValue };

struct HeadPatch {
  int layer;
  int head;
  HeadPart part;
  int pos0;                   // absolute position of the first row of values
  std::vector<float> values;  // [rows, head_dim]
};

struct FrozenAttention {
  int layer;
  int pos0;                  // absolute position of the first row of heads
  std::vector<float> heads;  // [rows, n_embd]: every head's output, heads concatenated
  bool inputs = false;       // with an observer, also compute and report ln_1, q, k and v
};

// The points of a block's stream a StreamEdit may rewrite.
enum class StreamPoint { kResidPre, kResidMid, kResidPost, kAttnOut, kMlpOut };
// The observed tensor (hooks.h) at a stream point.
Hook StreamPointHook(StreamPoint p);

struct StreamEdit {
  int layer;
  StreamPoint point;
  // Rewrites x [rows, n_embd], the rows of absolute positions [pos0, pos0 + rows), in place.
  // Called from the forward pass: must not throw.
  std::function<void(int pos0, int rows, float* x)> edit;
  // The edit's vector-Jacobian product, for the backward pass (model/backward.h): given the rows
  // x_in [rows, n_embd] as they entered the edit and g [rows, n_embd] = dm/d(edited rows), makes g
  // dm/d(x_in) in place. Empty: the edit cannot be differentiated, and a backward pass through it
  // refuses, naming it (never treating it as the identity).
  std::function<void(int pos0, int rows, const float* x_in, float* g)> backward;
  // What the edit is, for messages ("SAE clamp of feature 12 at blocks.3.hook_resid_pre").
  std::string name;
};

struct Interventions {
  std::vector<HeadRef> ablate_heads;
  // Empty: zero ablation. Otherwise [n_layer, n_embd], the replacement for each ablated head's
  // slice [h * head_dim, (h + 1) * head_dim) of layer l's "attn_heads" row.
  std::vector<float> head_means;
  std::vector<int> skip_attn;
  std::vector<int> skip_mlp;
  std::vector<int> no_residual;
  bool post_norm = false;
  std::vector<ResidPatch> patches;
  std::vector<HeadPatch> head_patches;
  std::vector<FrozenAttention> frozen_attn;  // at most one per block
  std::vector<StreamEdit> stream_edits;      // applied in order at each point

  bool empty() const {
    return ablate_heads.empty() && skip_attn.empty() && skip_mlp.empty() && no_residual.empty() &&
           !post_norm && patches.empty() && head_patches.empty() && frozen_attn.empty() &&
           stream_edits.empty();
  }
  // Throws gpt2::Error naming the valid range of the first layer, head or size out of range.
  void Validate(const Config& c) const;
  // The first block whose computation differs from the plain model (n_layer if none): the KV
  // cache and the residual stream before it are those of a plain run.
  int FirstChangedBlock(int n_layer) const;
  // Throws gpt2::Error unless every frozen block from first_block on has rows for positions
  // [begin, end), the rows a call runs.
  void CheckRows(const Config& c, int begin, int end, int first_block) const;
  // Block `layer`'s frozen attention, or nullptr.
  const FrozenAttention* Frozen(int layer) const {
    for (const FrozenAttention& f : frozen_attn) {
      if (f.layer == layer) return &f;
    }
    return nullptr;
  }
  // Whether the final residual stream is still the sum of every component's write (embedding,
  // heads, biases, MLPs), which direct logit attribution needs.
  // (Stream edits keep it a sum: their writes are one more term, see model/attribution.h.)
  bool KeepsResidualSum() const { return no_residual.empty() && !post_norm && patches.empty(); }
  // Runs the stream edits of (layer, point) over x [rows, C], rows from absolute position pos0.
  void EditStream(int layer, StreamPoint point, int pos0, int rows, float* x) const {
    for (const StreamEdit& e : stream_edits) {
      if (e.layer == layer && e.point == point) e.edit(pos0, rows, x);
    }
  }
  // Whether `layer` is in one of the layer lists above.
  static bool Lists(const std::vector<int>& layers, int layer) {
    for (int l : layers) {
      if (l == layer) return true;
    }
    return false;
  }
};

struct RunOptions {
  // Receives the named tensors of observer.h; empty: nothing is observed or copied.
  ActivationObserver observer;
  // Two observed tensors cost more than a copy, so an observer that does not read them can
  // turn them off: "attn_scores" (the pre-softmax scores, [H, T, keys] per block) and "logits"
  // for every position ([T, V]: the unembedding of every row, for GPT-2 small ~45 % of the
  // blocks' work and T x 201 kB). Off, "logits" is not reported at all.
  bool observe_scores = true;
  bool observe_all_logits = true;
  // "attn_probs" ([H, T, keys] per block) likewise: an observer that keeps the queries and keys
  // instead (the capture store) saves their copy and a [H, T, keys] buffer.
  bool observe_probs = true;
  // Whether the observer needs each tensor of a prompt in one report. If not, a long prompt runs
  // in Session::kPrefillChunk pieces as an unobserved one does (each report then covers a chunk,
  // from its pos0), which keeps the activation and attention buffers small.
  bool observe_whole_prompt = true;
  // Null: the plain model.
  const Interventions* interventions = nullptr;
  // When set, [n_layer]: each block this call runs gets its wall time in milliseconds (steady
  // clock, attention and MLP together); blocks it does not run keep their value. Null: no
  // clock is read.
  std::vector<double>* block_ms = nullptr;
};

}  // namespace gpt2
