#include "lab/graph.h"

#include <cmath>

#include "base/error.h"
#include "model/top_k.h"
#include "model/config.h"

namespace gpt2 {

AttributionGraph AttributionGraphOf(Conversation& c, const TranscoderSet& transcoders,
                                    const std::vector<int>& prompt, const GraphOptions& options) {
  if (!c.interventions().empty()) {
    throw Error("The attribution graph reads the plain model; clear the interventions first.");
  }
  if (prompt.empty()) throw Error("The prompt is empty.");
  std::vector<int> ids = {kEndOfText};  // circuit-tracer's graphs start at a BOS
  ids.insert(ids.end(), prompt.begin(), prompt.end());
  c.CheckPrompt(static_cast<int>(ids.size()));
  for (int t : options.targets) c.RequireToken(t);
  return c.WithRestore([&] { return BuildAttributionGraph(c.UnrecordedSession(), transcoders, ids, options); });
}

namespace {

// logit[tok] - mean_v logit[v]: the graph's logit quantity, ln_f(x) . (W_U[tok] - mean_v W_U[v]).
double Demeaned(const float* logits, int n_vocab, int tok) {
  double mean = 0;
  for (int v = 0; v < n_vocab; ++v) mean += logits[v];
  return logits[tok] - mean / n_vocab;
}

}  // namespace

GraphCheck CheckGraph(Conversation& c, const TranscoderSet& transcoders, const AttributionGraph& g,
                      const std::vector<int>& nodes, float value, int logit) {
  if (nodes.empty()) throw Error("Pick at least one feature node to check.");
  if (!std::isfinite(value)) throw Error("The clamp value must be a finite number.");
  if (logit < 0) logit = g.logit_begin();
  GraphCheck out;
  out.predicted = PredictedLogitChange(g, nodes, value, logit);
  std::vector<TranscoderClamp> clamps;
  for (int i : nodes) {
    const GraphNode& n = g.nodes[i];
    clamps.push_back(TranscoderClamp{n.layer, n.position, n.index, value});
  }
  Interventions iv;
  iv.stream_edits = TranscoderClampEdits(transcoders, clamps, c.config().n_ctx);
  c.CheckPrompt(g.size() > 0 ? static_cast<int>(g.ids.size()) : 0);
  const int V = c.config().n_vocab, tok = g.nodes[logit].index;
  out.exact = c.WithRestore([&] {
    Session& s = c.UnrecordedSession();
    s.Reset();
    const double plain = Demeaned(s.Prefill(g.ids.data(), static_cast<int>(g.ids.size())), V, tok);
    s.Reset();
    RunOptions run;
    run.interventions = &iv;
    return Demeaned(s.Prefill(g.ids.data(), static_cast<int>(g.ids.size()), run), V, tok) - plain;
  });
  return out;
}

GraphFeatureCard FeatureCardOf(Conversation& c, const TranscoderSet& transcoders, const std::vector<int>& ids,
                               int layer, int feature, int k) {
  const Sae* tc = transcoders.block(layer);
  if (tc == nullptr) throw Error("The transcoders have no block " + std::to_string(layer) + ".");
  tc->CheckFeature(feature);
  if (k < 0) throw Error("k must be >= 0.");
  c.CheckPrompt(static_cast<int>(ids.size()));
  for (int id : ids) c.RequireToken(id);
  const int C = c.config().n_embd, T = static_cast<int>(ids.size()), V = c.config().n_vocab;
  GraphFeatureCard card;
  std::vector<float> mid;
  c.WithRestore([&] {
    Session& s = c.UnrecordedSession();
    s.Reset();
    RunOptions run;
    run.observe_scores = run.observe_all_logits = run.observe_probs = false;
    run.observer = [&](const Activation& a) {
      if (a.hook == Hook::kResidMid && a.layer == layer) mid.assign(a.data, a.data + int64_t(T) * C);
    };
    s.Prefill(ids.data(), T, run);
    return 0;
  });
  card.activations.resize(T);
  SaeScratch scratch;
  tc->EncodeFeatures(mid.data(), T, &feature, 1, card.activations.data(), nullptr, scratch);
  std::vector<float> w = tc->LogitWeights(c.model(), {feature});
  std::vector<int> order;
  LargestIndices(w.data(), V, k, &order);
  for (int i : order) {
    card.promoted.push_back(i);
    card.promoted_weights.push_back(w[i]);
  }
  for (float& x : w) x = -x;
  LargestIndices(w.data(), V, k, &order);
  for (int i : order) {
    card.suppressed.push_back(i);
    card.suppressed_weights.push_back(-w[i]);
  }
  return card;
}

}  // namespace gpt2
