// One record of what a forward pass leaves (llm.c's ActivationTensors, gemma.cpp's forward
// layers of one type): per block the tensors TransformerLens names, over the T rows of one call.
// The analyses read their run from it (the backward pass, the attribution graph's replacement
// model, QK attribution, direct logit attribution, the lab's probes); the backward fills
// gradients of the same type (dm/d(tensor) in the tensor's own field and shape).
//
// A record is filled by RecordActs, which keeps only the tensors it is asked for (Keep) and
// turns off the reports nobody keeps (attention scores and patterns, every row's logits), so
// a collector pays for what it reads. Each tensor arrives as the observer reports it
// (observer.h, hooks.h: names, shapes, what interventions do to each); a field stays empty when
// it was not kept or not reported (a block a re-run skipped, a frozen block's scores).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "model/config.h"
#include "model/hooks.h"
#include "model/observer.h"
#include "model/run_options.h"

namespace gpt2 {

// A set of hooks: which tensors a record keeps.
class HookSet {
 public:
  constexpr HookSet() = default;
  constexpr HookSet(std::initializer_list<Hook> hooks) {
    for (Hook h : hooks) bits_ |= Bit(h);
  }
  // Every hook.
  static constexpr HookSet All() {
    HookSet all;
    all.bits_ = (uint32_t{1} << kNumHooks) - 1;
    return all;
  }
  constexpr bool has(Hook h) const { return (bits_ & Bit(h)) != 0; }
  constexpr HookSet& operator|=(HookSet other) {
    bits_ |= other.bits_;
    return *this;
  }
  constexpr bool empty() const { return bits_ == 0; }

 private:
  static constexpr uint32_t Bit(Hook h) { return uint32_t{1} << static_cast<int>(h); }
  uint32_t bits_ = 0;
};

// One block's tensors (C = n_embd, H = n_head, D = head_dim, F = n_ff, K = pos0 + T keys).
struct BlockActs {
  std::vector<float> resid_pre;   // [T, C]    blocks.l.hook_resid_pre
  std::vector<float> ln1;         // [T, C]    blocks.l.ln1.hook_normalized
  std::vector<float> q, k, v;     // [H, T, D] blocks.l.attn.hook_q, hook_k, hook_v (head-major)
  std::vector<float> scores;      // [H, T, K] blocks.l.attn.hook_attn_scores
  std::vector<float> pattern;     // [H, T, K] blocks.l.attn.hook_pattern
  std::vector<float> z;           // [T, C]    blocks.l.attn.hook_z (heads concatenated)
  std::vector<float> attn_out;    // [T, C]    blocks.l.hook_attn_out
  std::vector<float> resid_mid;   // [T, C]    blocks.l.hook_resid_mid
  std::vector<float> ln2;         // [T, C]    blocks.l.ln2.hook_normalized
  std::vector<float> mlp_pre;     // [T, F]    blocks.l.mlp.hook_pre
  std::vector<float> mlp_post;    // [T, F]    blocks.l.mlp.hook_post
  std::vector<float> mlp_out;     // [T, C]    blocks.l.hook_mlp_out
  std::vector<float> resid_post;  // [T, C]    blocks.l.hook_resid_post
};

struct Acts {
  int T = 0;                        // rows of the call
  int pos0 = 0;                     // absolute position of row 0
  int C = 0;                        // n_embd
  std::vector<float> embed;         // [T, C] hook_embed + hook_pos_embed
  std::vector<BlockActs> blocks;    // [n_layer]
  std::vector<float> final_stream;  // [T, C] the stream entering ln_f (the last resid_post)
  std::vector<float> ln_final;      // [T, C] ln_final.hook_normalized
  std::vector<float> logits;        // [T, V] (observe_all_logits) or the last row's [V]

  // The field of `hook` at `layer` (-1 for embed, ln_final, logits).
  std::vector<float>& Of(Hook hook, int layer);
  const std::vector<float>& Of(Hook hook, int layer) const;
  // The stream entering block l before its patches (Session::Rerun's resid_in): the embedding
  // (l = 0) or block l - 1's resid_post; l = n_layer: the final stream (final_stream, or the last
  // block's resid_post when only that was kept).
  const std::vector<float>& StreamInto(int l) const;
  // Row t of a [T, width] field.
  static const float* Row(const std::vector<float>& field, int t, int width) {
    return field.data() + int64_t(t) * width;
  }
  const float* Row(const std::vector<float>& field, int t) const { return Row(field, t, C); }
};

// What a record keeps: the hooks at every block, and the final stream.
struct Keep {
  HookSet hooks;
  bool final_stream = false;
};

// Sets run's observer to fill `acts` (emptied and sized for the model first) with what `keep`
// asks for, and turns off the reports it does not keep (scores, patterns, every row's logits);
// each tensor of the call arrives in one report (observe_whole_prompt). `also`, when set, sees
// every report as well (a capture store beside it). acts (and also) must outlive the run.
void RecordActs(const Config& config, Keep keep, Acts& acts, RunOptions& run,
                const ActivationObserver* also = nullptr);

// An observer that fills `acts` with `keep`'s tensors as they are reported (sized for the model
// first): for gradients reported by the backward (backward.h), which reports every tensor whole.
ActivationObserver ActsObserver(const Config& config, Keep keep, Acts& acts);

}  // namespace gpt2
