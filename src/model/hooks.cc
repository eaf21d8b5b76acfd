#include "model/hooks.h"

#include "model/run_options.h"

namespace gpt2 {

namespace {

// In Hook's order (checked by the tests: tests/model/capture_test.cc).
const HookInfo kHooks[kNumHooks] = {
    {Hook::kEmbed, "embed", "hook_embed", false},
    {Hook::kResidPre, "resid_pre", "blocks.{}.hook_resid_pre", true},
    {Hook::kLn1, "ln1", "blocks.{}.ln1.hook_normalized", true},
    {Hook::kQ, "q", "blocks.{}.attn.hook_q", true},
    {Hook::kK, "k", "blocks.{}.attn.hook_k", true},
    {Hook::kV, "v", "blocks.{}.attn.hook_v", true},
    {Hook::kAttnScores, "attn_scores", "blocks.{}.attn.hook_attn_scores", true},
    {Hook::kAttnProbs, "attn_probs", "blocks.{}.attn.hook_pattern", true},
    {Hook::kAttnHeads, "attn_heads", "blocks.{}.attn.hook_z", true},
    {Hook::kAttnOut, "attn_out", "blocks.{}.hook_attn_out", true},
    {Hook::kResidMid, "resid_attn", "blocks.{}.hook_resid_mid", true},
    {Hook::kLn2, "ln2", "blocks.{}.ln2.hook_normalized", true},
    {Hook::kMlpPre, "mlp_pre", "blocks.{}.mlp.hook_pre", true},
    {Hook::kMlpAct, "mlp_act", "blocks.{}.mlp.hook_post", true},
    {Hook::kMlpOut, "mlp_out", "blocks.{}.hook_mlp_out", true},
    {Hook::kResidPost, "resid_out", "blocks.{}.hook_resid_post", true},
    {Hook::kLnFinal, "ln_f", "ln_final.hook_normalized", false},
    {Hook::kLogits, "logits", nullptr, false},
};

}  // namespace

const HookInfo& Info(Hook h) { return kHooks[static_cast<int>(h)]; }

std::string LensName(Hook h, int layer) {
  const char* lens = Info(h).lens;
  if (lens == nullptr) return std::string();
  std::string s = lens;
  const size_t at = s.find("{}");
  if (at != std::string::npos) s.replace(at, 2, std::to_string(layer));
  return s;
}

bool FindHook(const std::string& name, Hook* out) {
  for (const HookInfo& info : kHooks) {
    if (name == info.name) {
      *out = info.hook;
      return true;
    }
  }
  return false;
}

Hook StreamPointHook(StreamPoint p) {
  switch (p) {
    case StreamPoint::kResidPre:
      return Hook::kResidPre;
    case StreamPoint::kResidMid:
      return Hook::kResidMid;
    case StreamPoint::kResidPost:
      return Hook::kResidPost;
    case StreamPoint::kAttnOut:
      return Hook::kAttnOut;
    case StreamPoint::kMlpOut:
      return Hook::kMlpOut;
  }
  return Hook::kResidPre;
}

}  // namespace gpt2
