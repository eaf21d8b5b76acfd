#include "lab/gradients.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "lab/prompt_pair.h"
#include "model/acts.h"

namespace gpt2 {

namespace {

int ArgMax(const float* x, int n) { return static_cast<int>(std::max_element(x, x + n) - x); }
int ArgMax(const std::vector<float>& x) { return ArgMax(x.data(), static_cast<int>(x.size())); }

// What attribution patching reads of a run: per block the heads' outputs (hook_z) and the stream
// entering it (hook_resid_pre, after its patches and edits).
const Keep kPatchable{{Hook::kAttnHeads, Hook::kResidPre}};

}  // namespace

SaliencyMethod SaliencyMethodNamed(const std::string& name) {
  if (name != "grad" && name != "ig")
    throw Error("The saliency method must be grad or ig, not '" + name + "'.");
  return name == "ig" ? SaliencyMethod::kIntegrated : SaliencyMethod::kGradient;
}

AtpCell AtpCellNamed(const std::string& name) {
  if (name != "head" && name != "resid")
    throw Error("The cell kind must be head or resid, not '" + name + "'.");
  return name == "head" ? AtpCell::kHead : AtpCell::kResidPre;
}

SaliencyResult Saliency(Session& session, Backward& backward, const std::vector<int>& ids,
                        const SaliencyRequest& request, const Interventions* iv) {
  const Config& c = session.model().config();
  const int T = static_cast<int>(ids.size());
  const int64_t C = c.n_embd;
  if (request.method == SaliencyMethod::kIntegrated && request.steps < 1) {
    throw Error("integrated gradients need at least 1 step, got " + std::to_string(request.steps));
  }
  backward.Forward(session, ids, iv);
  SaliencyResult r;
  r.position = request.position < 0 ? T - 1 : request.position;
  std::vector<float> logits;
  backward.Logits(session, r.position, logits);  // checks the position
  r.target = request.target < 0 ? ArgMax(logits) : request.target;
  r.contrast = request.contrast;
  const MetricSpec spec{r.position, r.target, r.contrast};
  r.metric = backward.Metric(session, spec);
  const std::vector<float> x = backward.embed();  // [T, C]
  std::vector<double> grad(size_t(T) * C, 0.0);
  Acts grads;
  const auto add_embed_grad = [&] {
    backward.Run(spec, ActsObserver(c, Keep{{Hook::kEmbed}}, grads));
    for (size_t i = 0; i < grad.size(); ++i) grad[i] += grads.embed[i];
  };
  if (request.method == SaliencyMethod::kGradient) {
    add_embed_grad();
    r.delta = r.metric;
  } else {
    const int K = request.steps;
    std::vector<float> scaled(x.size());
    for (int k = 0; k < K; ++k) {
      const float alpha = static_cast<float>((k + 0.5) / K);
      for (size_t i = 0; i < x.size(); ++i) scaled[i] = alpha * x[i];
      backward.Forward(session, ids, iv, scaled.data());
      add_embed_grad();
    }
    for (double& g : grad) g /= K;
    // m(0): with zeros entering block 0 every position computes the same row (LayerNorm, the MLP
    // and int8 rounding act per row; causal attention over equal keys and values returns that
    // value), so one position stands for all, unless a patch or a head patch sets positions apart.
    const bool uniform = iv == nullptr || (iv->patches.empty() && iv->head_patches.empty() &&
                                           iv->frozen_attn.empty());
    if (uniform) {
      const std::vector<float> zero(C, 0.0f);
      backward.Forward(session, {ids[0]}, iv, zero.data());
      r.delta = r.metric - backward.Metric(session, MetricSpec{0, spec.target, spec.contrast});
    } else {
      std::fill(scaled.begin(), scaled.end(), 0.0f);
      backward.Forward(session, ids, iv, scaled.data());
      r.delta = r.metric - backward.Metric(session, spec);
    }
  }
  r.values.assign(T, 0.0);
  for (int p = 0; p < T; ++p) {
    double v = 0.0;
    for (int64_t d = 0; d < C; ++d) v += double(x[p * C + d]) * grad[p * C + d];
    r.values[p] = v;
    r.total += v;
  }
  return r;
}

ScoreSaliencyResult ScoreSaliency(Session& session, Backward& backward, const std::vector<int>& ids,
                                  const ScoreSpec& spec, const Interventions* iv) {
  const Config& c = session.model().config();
  const int64_t C = c.n_embd;
  const int T = static_cast<int>(ids.size());
  backward.Forward(session, ids, iv);
  ScoreSaliencyResult r;
  r.spec = spec;
  r.score = backward.Score(spec);  // checks the spec
  const std::vector<float>& x = backward.embed();
  Acts grads;
  backward.RunScore(spec, ActsObserver(c, Keep{{Hook::kEmbed}}, grads));
  r.values.assign(T, 0.0);
  for (int p = 0; p < T; ++p) {
    double v = 0.0;
    for (int64_t d = 0; d < C; ++d) v += double(x[p * C + d]) * grads.embed[p * C + d];
    r.values[p] = v;
  }
  for (double v : r.values) r.total += v;
  return r;
}

AtpResult AttributionPatching(Session& session, Backward& backward, const std::vector<int>& clean,
                              const std::vector<int>& corrupt, int target, int contrast,
                              const Interventions* iv) {
  const Config& c = session.model().config();
  CheckPromptPair(clean, corrupt, "attribution patching");
  const int T = static_cast<int>(clean.size());
  const int L = c.n_layer, H = c.n_head;
  const int64_t C = c.n_embd, D = c.head_dim();
  AtpResult r;
  r.tokens = T;

  // The corrupted run needs no backward: a plain prefill, observed for z and the stream.
  Acts bad;
  RunOptions bad_run;
  RecordActs(c, kPatchable, bad, bad_run);
  bad_run.interventions = iv;
  session.Reset();
  const float* bad_logits = session.Prefill(corrupt.data(), T, bad_run);
  std::vector<float> logits(bad_logits, bad_logits + c.n_vocab);

  backward.Forward(session, clean, iv, nullptr, kPatchable.hooks);
  const Acts& good = backward.acts();
  std::vector<float> clean_logits;
  backward.Logits(session, T - 1, clean_logits);
  r.target = target < 0 ? ArgMax(clean_logits) : target;
  r.contrast = contrast;
  const MetricSpec spec{T - 1, r.target, r.contrast};
  r.metric_clean = backward.Metric(session, spec);
  r.metric_corrupt = double(logits[r.target]) - (contrast >= 0 ? double(logits[contrast]) : 0.0);

  r.heads.assign(size_t(L) * H, 0.0);
  r.resid_pre.assign(size_t(L) * T, 0.0);
  Acts grads;
  backward.Run(spec, ActsObserver(c, kPatchable, grads));
  for (int l = 0; l < L; ++l) {
    const BlockActs& b = bad.blocks[l];   // corrupted
    const BlockActs& g = good.blocks[l];  // clean
    const BlockActs& dm = grads.blocks[l];
    for (int h = 0; h < H; ++h) {
      double sum = 0.0;
      for (int p = 0; p < T; ++p) {
        const int64_t at = p * C + h * D;
        for (int64_t d = 0; d < D; ++d) sum += (double(b.z[at + d]) - g.z[at + d]) * dm.z[at + d];
      }
      r.heads[size_t(l) * H + h] = sum;
    }
    for (int p = 0; p < T; ++p) {
      double sum = 0.0;
      for (int64_t d = 0; d < C; ++d) {
        sum += (double(b.resid_pre[p * C + d]) - g.resid_pre[p * C + d]) * dm.resid_pre[p * C + d];
      }
      r.resid_pre[size_t(l) * T + p] = sum;
    }
  }
  return r;
}

ExactPatchResult ExactPatch(Session& session, const std::vector<int>& clean,
                            const std::vector<int>& corrupt, AtpCell cell, int layer, int index,
                            int target, int contrast, const Interventions* iv) {
  const Config& c = session.model().config();
  CheckPromptPair(clean, corrupt, "an exact patch");
  const int T = static_cast<int>(clean.size());
  const int64_t C = c.n_embd, D = c.head_dim();
  if (layer < 0 || layer >= c.n_layer) {
    throw Error("layer " + std::to_string(layer) + " is out of range; valid layers are 0.." +
                std::to_string(c.n_layer - 1));
  }
  const int n_index = cell == AtpCell::kHead ? c.n_head : T;
  if (index < 0 || index >= n_index) {
    throw Error(std::string(cell == AtpCell::kHead ? "head " : "position ") +
                std::to_string(index) + " is out of range; valid ones are 0.." +
                std::to_string(n_index - 1));
  }
  if (target >= c.n_vocab || contrast >= c.n_vocab) {
    throw Error("token id out of range; valid ids are 0.." + std::to_string(c.n_vocab - 1));
  }
  Acts bad;
  RunOptions bad_run;
  RecordActs(c, kPatchable, bad, bad_run);
  bad_run.interventions = iv;
  session.Reset();
  session.Prefill(corrupt.data(), T, bad_run);

  RunOptions run;
  run.interventions = iv;
  session.Reset();
  const float* logits = session.Prefill(clean.data(), T, run);
  ExactPatchResult r;
  r.target = target < 0 ? ArgMax(logits, c.n_vocab) : target;
  r.contrast = contrast;
  const auto metric = [&](const float* l) {
    return double(l[r.target]) - (contrast >= 0 ? double(l[contrast]) : 0.0);
  };
  r.metric_clean = metric(logits);

  Interventions patched = iv != nullptr ? *iv : Interventions();
  if (cell == AtpCell::kHead) {
    std::vector<float> z(size_t(T) * D);
    for (int p = 0; p < T; ++p) {
      std::copy_n(bad.blocks[layer].z.data() + p * C + index * D, D, z.data() + size_t(p) * D);
    }
    patched.head_patches.push_back({layer, index, HeadPart::kOutput, 0, std::move(z)});
  } else {
    const float* x = bad.blocks[layer].resid_pre.data() + size_t(index) * C;
    patched.patches.push_back({layer, index, std::vector<float>(x, x + C)});
  }
  run.interventions = &patched;
  session.Reset();
  r.metric_patched = metric(session.Prefill(clean.data(), T, run));
  r.value = r.metric_patched - r.metric_clean;
  return r;
}

// ---- On a conversation ----------------------------------------------------------------------

SaliencyResult Saliency(Conversation& c, const SaliencyRequest& request) {
  if (c.tokens().empty()) throw Error("Generate some text first.");
  const std::vector<int> ids = c.tokens();
  return c.WithRestore([&] {
    return Saliency(c.UnrecordedSession(), c.backward(), ids, request, &c.interventions());
  });
}

ScoreSaliencyResult ScoreSaliency(Conversation& c, const ScoreSpec& spec) {
  if (c.tokens().empty()) throw Error("Generate some text first.");
  const std::vector<int> ids = c.tokens();
  return c.WithRestore([&] {
    return ScoreSaliency(c.UnrecordedSession(), c.backward(), ids, spec, &c.interventions());
  });
}

AtpResult AttributionPatching(Conversation& c, const std::vector<int>& clean,
                              const std::vector<int>& corrupt, int target, int contrast) {
  c.CheckPrompt(static_cast<int>(clean.size()));
  c.CheckPrompt(static_cast<int>(corrupt.size()));
  if (target >= c.config().n_vocab || contrast >= c.config().n_vocab) {
    throw Error("token id out of range; valid ids are 0.." +
                std::to_string(c.config().n_vocab - 1));
  }
  return c.WithRestore([&] {
    return AttributionPatching(c.UnrecordedSession(), c.backward(), clean, corrupt, target,
                               contrast, &c.interventions());
  });
}

ExactPatchResult ExactPatch(Conversation& c, const std::vector<int>& clean,
                            const std::vector<int>& corrupt, AtpCell cell, int layer, int index,
                            int target, int contrast) {
  c.CheckPrompt(static_cast<int>(clean.size()));
  c.CheckPrompt(static_cast<int>(corrupt.size()));
  return c.WithRestore([&] {
    return ExactPatch(c.UnrecordedSession(), clean, corrupt, cell, layer, index, target, contrast,
                      &c.interventions());
  });
}

}  // namespace gpt2
