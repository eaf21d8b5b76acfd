// The named points of the forward pass, written down once: the tensors the observer reports
// (observer.h), which the capture store, the backward's gradients (backward.h), the CLI's JSON
// and the page's export (by TransformerLens's names) all name from here.
#pragma once

#include <string>

namespace gpt2 {

// In the order a forward pass reports them.
enum class Hook : int {
  kEmbed,  // "embed"        hook_embed + hook_pos_embed (= blocks.0.hook_resid_pre before patches)
  kResidPre,    // "resid_pre"    blocks.L.hook_resid_pre
  kLn1,         // "ln1"          blocks.L.ln1.hook_normalized
  kQ,           // "q"            blocks.L.attn.hook_q
  kK,           // "k"            blocks.L.attn.hook_k
  kV,           // "v"            blocks.L.attn.hook_v
  kAttnScores,  // "attn_scores"  blocks.L.attn.hook_attn_scores
  kAttnProbs,   // "attn_probs"   blocks.L.attn.hook_pattern
  kAttnHeads,   // "attn_heads"   blocks.L.attn.hook_z
  kAttnOut,     // "attn_out"     blocks.L.hook_attn_out
  kResidMid,    // "resid_attn"   blocks.L.hook_resid_mid
  kLn2,         // "ln2"          blocks.L.ln2.hook_normalized
  kMlpPre,      // "mlp_pre"      blocks.L.mlp.hook_pre
  kMlpAct,      // "mlp_act"      blocks.L.mlp.hook_post
  kMlpOut,      // "mlp_out"      blocks.L.hook_mlp_out
  kResidPost,   // "resid_out"    blocks.L.hook_resid_post
  kLnFinal,     // "ln_f"         ln_final.hook_normalized
  kLogits,      // "logits"
};
constexpr int kNumHooks = static_cast<int>(Hook::kLogits) + 1;

struct HookInfo {
  Hook hook;
  const char* name;  // ours (the observer's, the golden files', the page's)
  const char* lens;  // TransformerLens's, "{}" standing for the block; nullptr: none
  bool per_block;
};

const HookInfo& Info(Hook h);
inline const char* HookName(Hook h) { return Info(h).name; }
// TransformerLens's name of the hook at `layer` ("blocks.3.hook_resid_mid",
// "ln_final.hook_normalized").
std::string LensName(Hook h, int layer);
// The hook named `name` (ours); false if there is none.
bool FindHook(const std::string& name, Hook* out);

}  // namespace gpt2
