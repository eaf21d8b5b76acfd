#include "lab/graph.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/error.h"
#include "format/json.h"
#include "model/top_k.h"
#include "model/config.h"

namespace gpt2 {
namespace {

// The checks both ways of building make, and the ids the graph is built on.
std::vector<int> GraphIds(const Conversation& c, const std::vector<int>& prompt, const GraphOptions& options) {
  if (!c.interventions().empty()) {
    throw Error("The attribution graph reads the plain model; clear the interventions first.");
  }
  if (prompt.empty()) throw Error("The prompt is empty.");
  std::vector<int> ids = {kEndOfText};  // circuit-tracer's graphs start at a BOS
  ids.insert(ids.end(), prompt.begin(), prompt.end());
  c.CheckPrompt(static_cast<int>(ids.size()));
  for (int t : options.targets) c.RequireToken(t);
  return ids;
}

}  // namespace

AttributionGraph AttributionGraphOf(Conversation& c, const TranscoderSet& transcoders,
                                    const std::vector<int>& prompt, const GraphOptions& options) {
  const std::vector<int> ids = GraphIds(c, prompt, options);
  return c.WithRestore([&] { return BuildAttributionGraph(c.UnrecordedSession(), transcoders, ids, options); });
}

GraphJob::GraphJob(Conversation& c, const TranscoderSet& transcoders, const std::vector<int>& prompt,
                   const GraphOptions& options) {
  const std::vector<int> ids = GraphIds(c, prompt, options);
  c.WithRestore([&] {
    build_ = std::make_unique<AttributionGraphBuild>(c.UnrecordedSession(), transcoders, ids, options);
    return 0;
  });
}

GraphProgress GraphJob::Continue() {
  build_->Continue();
  return build_->progress();
}

std::vector<int> GraphFeatureNodes(const AttributionGraph& g, const std::vector<std::string>& node_ids) {
  std::vector<int> chosen;
  for (const std::string& id : node_ids) {
    int found = -1;
    for (int i = 0; i < g.n_features && found < 0; ++i) {
      if (GraphNodeId(g, i) == id) found = i;
    }
    if (found < 0) throw Error("'" + id + "' is not a feature node of this graph");
    chosen.push_back(found);
  }
  return chosen;
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

const char* GraphFeatureType(GraphNodeKind k) {
  switch (k) {
    case GraphNodeKind::kFeature: return "cross layer transcoder";
    case GraphNodeKind::kError: return "mlp reconstruction error";
    case GraphNodeKind::kEmbedding: return "embedding";
    case GraphNodeKind::kLogit: return "logit";
  }
  return "";
}

bool GraphSelection::edge(const AttributionGraph& g, int t, int s) const {
  const float w = g.edge(t, s);
  if (!prune) return w != 0.0f;
  return pruned.edge_mask[int64_t(t) * g.size() + s] && pruned.node_mask[t] && pruned.node_mask[s];
}

GraphSelection SelectGraph(const AttributionGraph& g, double node_threshold, double edge_threshold, bool prune) {
  GraphSelection out;
  out.pruned = PruneAttributionGraph(g, node_threshold, edge_threshold);
  out.prune = prune;
  out.node_threshold = node_threshold;
  out.edge_threshold = edge_threshold;
  const int N = g.size();
  out.used.assign(N, 1);
  if (!prune) return out;
  out.used.assign(N, 0);
  for (int t = 0; t < N; ++t) {
    for (int s = 0; s < N; ++s) {
      if (out.edge(g, t, s)) out.used[t] = out.used[s] = 1;
    }
  }
  for (int i = g.embedding_begin(); i < N; ++i) out.used[i] = 1;
  return out;
}

namespace {

// circuit-tracer's Node fields for node i (graph_models.py: feature_node, error_node,
// token_node, logit_node).
void WriteNode(std::ostream& out, const AttributionGraph& g, int i, const PrunedGraph& pruned,
               const std::string& token) {
  const GraphNode& n = g.nodes[i];
  const std::string id = GraphNodeId(g, i);
  int feature = n.index;
  std::string layer = std::to_string(n.layer), js = id;
  if (n.kind == GraphNodeKind::kError) feature = -1;
  if (n.kind == GraphNodeKind::kEmbedding) {
    feature = n.position;
    layer = "E";
    js = "E_" + std::to_string(n.index) + "-" + std::to_string(n.position);
  }
  if (n.kind == GraphNodeKind::kFeature) js = std::to_string(n.layer) + "_" + std::to_string(n.index) + "-0";
  if (n.kind == GraphNodeKind::kError) js = std::to_string(n.layer) + "_-1-" + std::to_string(n.position);
  if (n.kind == GraphNodeKind::kLogit) js = "L_" + std::to_string(n.index) + "-" + std::to_string(n.position);
  out << "{\"node_id\":";
  JsonString(out, id);
  out << ",\"feature\":" << feature << ",\"layer\":";
  JsonString(out, layer);
  out << ",\"ctx_idx\":" << n.position << ",\"feature_type\":";
  JsonString(out, GraphFeatureType(n.kind));
  const bool logit = n.kind == GraphNodeKind::kLogit;
  out << ",\"token_prob\":";
  JsonNumber(out, logit ? n.activation : 0.0);
  out << ",\"is_target_logit\":" << (logit && i == g.logit_begin() ? "true" : "false")
      << ",\"run_idx\":0,\"reverse_ctx_idx\":0,\"jsNodeId\":";
  JsonString(out, js);
  out << ",\"clerp\":";
  char p[32];
  std::snprintf(p, sizeof p, "%.3f", logit ? n.activation : 0.0);
  JsonString(out, logit ? "Output \"" + token + "\" (p=" + p + ")" : std::string());
  out << ",\"influence\":";
  if (logit) out << "null";
  else JsonNumber(out, pruned.cumulative[i]);
  out << ",\"activation\":";
  if (n.kind == GraphNodeKind::kFeature) JsonNumber(out, n.activation);
  else out << "null";
  out << "}";
}

}  // namespace

std::string GraphJson(const AttributionGraph& g, const GraphSelection& sel, const Tokenizer& tokenizer) {
  std::ostringstream out;
  const int N = g.size();
  out << "{\"metadata\":{\"slug\":\"gpt2-graph\",\"scan\":\"gpt2-small-dun-chl-mlp-tc\",\"transcoder_list\":[],"
         "\"prompt_tokens\":[";
  for (int p = 0; p < g.n_pos; ++p) {
    if (p) out << ",";
    JsonString(out, tokenizer.Decode({g.ids[p]}));
  }
  out << "],\"prompt\":";
  JsonString(out, tokenizer.Decode(g.ids));
  out << ",\"node_threshold\":";
  JsonNumber(out, sel.node_threshold);
  out << ",\"schema_version\":1";
  out << ",\"replacement_score\":";
  JsonNumber(out, sel.pruned.replacement_score);
  out << ",\"completeness_score\":";
  JsonNumber(out, sel.pruned.completeness_score);
  out << "},\"qParams\":{\"pinnedIds\":[],\"supernodes\":[],\"linkType\":\"both\",\"clickedId\":\"\",\"sg_pos\":\"\"},"
         "\"nodes\":[";
  bool first = true;
  for (int i = 0; i < N; ++i) {
    if (!sel.used[i]) continue;
    if (!first) out << ",";
    first = false;
    WriteNode(out, g, i, sel.pruned,
              g.nodes[i].kind == GraphNodeKind::kLogit ? tokenizer.Decode({g.nodes[i].index}) : "");
  }
  out << "],\"links\":[";
  first = true;
  // By target, then source: circuit-tracer's order (create_used_nodes_and_edges walks the edge
  // mask's nonzeros, rows being targets).
  for (int t = 0; t < N; ++t) {
    for (int s = 0; s < N; ++s) {
      if (!sel.used[s] || !sel.used[t] || !sel.edge(g, t, s)) continue;
      if (!first) out << ",";
      first = false;
      out << "{\"source\":";
      JsonString(out, GraphNodeId(g, s));
      out << ",\"target\":";
      JsonString(out, GraphNodeId(g, t));
      out << ",\"weight\":";
      JsonNumber(out, g.edge(t, s));
      out << "}";
    }
  }
  out << "]}\n";
  return out.str();
}

}  // namespace gpt2
