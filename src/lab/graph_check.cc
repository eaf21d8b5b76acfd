#include "lab/graph_check.h"

#include <cmath>

#include "base/error.h"

namespace gpt2 {
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

}  // namespace gpt2
