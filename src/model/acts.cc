#include "model/acts.h"

namespace gpt2 {

namespace {

std::vector<float>* FieldOf(Acts& acts, Hook hook, int layer) {
  if (!Info(hook).per_block) {
    switch (hook) {
      case Hook::kEmbed:
        return &acts.embed;
      case Hook::kLnFinal:
        return &acts.ln_final;
      case Hook::kLogits:
        return &acts.logits;
      default:
        return nullptr;
    }
  }
  if (layer < 0 || layer >= static_cast<int>(acts.blocks.size())) return nullptr;
  BlockActs& b = acts.blocks[layer];
  switch (hook) {
    case Hook::kResidPre:
      return &b.resid_pre;
    case Hook::kLn1:
      return &b.ln1;
    case Hook::kQ:
      return &b.q;
    case Hook::kK:
      return &b.k;
    case Hook::kV:
      return &b.v;
    case Hook::kAttnScores:
      return &b.scores;
    case Hook::kAttnProbs:
      return &b.pattern;
    case Hook::kAttnHeads:
      return &b.z;
    case Hook::kAttnOut:
      return &b.attn_out;
    case Hook::kResidMid:
      return &b.resid_mid;
    case Hook::kLn2:
      return &b.ln2;
    case Hook::kMlpPre:
      return &b.mlp_pre;
    case Hook::kMlpAct:
      return &b.mlp_post;
    case Hook::kMlpOut:
      return &b.mlp_out;
    case Hook::kResidPost:
      return &b.resid_post;
    default:
      return nullptr;
  }
}

void Reset(const Config& config, Acts& acts) {
  acts = Acts();
  acts.C = config.n_embd;
  acts.blocks.resize(config.n_layer);
}

void Take(Keep keep, int n_layer, Acts& acts, const Activation& a) {
  const int64_t n = a.shape[0] * a.shape[1] * (a.n_dims == 3 ? a.shape[2] : 1);
  // Row tensors are [T, ...]; head-major ones [H, T, ...].
  const int rows = static_cast<int>(a.n_dims == 3 ? a.shape[1] : a.shape[0]);
  if (a.hook != Hook::kLogits) {
    acts.T = rows;
    acts.pos0 = a.pos0;
  }
  if (keep.final_stream && a.hook == Hook::kResidPost && a.layer == n_layer - 1) {
    acts.final_stream.assign(a.data, a.data + n);
  }
  if (!keep.hooks.has(a.hook)) return;
  if (std::vector<float>* field = FieldOf(acts, a.hook, a.layer)) field->assign(a.data, a.data + n);
}

}  // namespace

std::vector<float>& Acts::Of(Hook hook, int layer) {
  static std::vector<float> none;
  std::vector<float>* field = FieldOf(*this, hook, layer);
  return field != nullptr ? *field : none;
}

const std::vector<float>& Acts::Of(Hook hook, int layer) const {
  return const_cast<Acts&>(*this).Of(hook, layer);
}

const std::vector<float>& Acts::StreamInto(int l) const {
  if (l == 0) return embed;
  const bool last = l == static_cast<int>(blocks.size());
  return last && !final_stream.empty() ? final_stream : blocks[l - 1].resid_post;
}

void RecordActs(const Config& config, Keep keep, Acts& acts, RunOptions& run,
                const ActivationObserver* also) {
  Reset(config, acts);
  const HookSet h = keep.hooks;
  const bool observing_also = also != nullptr && *also;
  if (!observing_also) {
    run.observe_scores = h.has(Hook::kAttnScores);
    run.observe_probs = h.has(Hook::kAttnProbs);
    run.observe_all_logits = h.has(Hook::kLogits);
  }
  run.observe_whole_prompt = true;
  const int n_layer = config.n_layer;
  run.observer = [keep, n_layer, &acts, also, observing_also](const Activation& a) {
    if (observing_also) (*also)(a);
    Take(keep, n_layer, acts, a);
  };
}

ActivationObserver ActsObserver(const Config& config, Keep keep, Acts& acts) {
  Reset(config, acts);
  const int n_layer = config.n_layer;
  return [keep, n_layer, &acts](const Activation& a) { Take(keep, n_layer, acts, a); };
}

}  // namespace gpt2
