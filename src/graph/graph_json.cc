// circuit-tracer's graph file of graph/graph_json.h, and its node ids.
#include "graph/graph_json.h"

#include <cstdio>
#include <sstream>

#include "base/error.h"
#include "format/json.h"

namespace gpt2 {

std::string GraphNodeId(const AttributionGraph& g, int i) {
  const GraphNode& n = g.nodes.at(i);
  const std::string p = "_" + std::to_string(n.position);
  switch (n.kind) {
    case GraphNodeKind::kFeature:
      return std::to_string(n.layer) + "_" + std::to_string(n.index) + p;
    case GraphNodeKind::kError:
      return std::to_string(n.layer) + "_-1" + p;
    case GraphNodeKind::kEmbedding:
      return "E_" + std::to_string(n.index) + p;
    case GraphNodeKind::kLogit:
      return std::to_string(g.n_layer + 1) + "_" + std::to_string(n.index) + p;
  }
  return "";
}

std::vector<int> GraphFeatureNodes(const AttributionGraph& g,
                                   const std::vector<std::string>& node_ids) {
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

const char* GraphFeatureType(GraphNodeKind k) {
  switch (k) {
    case GraphNodeKind::kFeature:
      return "cross layer transcoder";
    case GraphNodeKind::kError:
      return "mlp reconstruction error";
    case GraphNodeKind::kEmbedding:
      return "embedding";
    case GraphNodeKind::kLogit:
      return "logit";
  }
  return "";
}

bool GraphSelection::edge(const AttributionGraph& g, int t, int s) const {
  const float w = g.edge(t, s);
  if (!prune) return w != 0.0f;
  return pruned.edge_mask[int64_t(t) * g.size() + s] && pruned.node_mask[t] && pruned.node_mask[s];
}

GraphSelection SelectGraph(const AttributionGraph& g, double node_threshold, double edge_threshold,
                           bool prune) {
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
  if (n.kind == GraphNodeKind::kFeature)
    js = std::to_string(n.layer) + "_" + std::to_string(n.index) + "-0";
  if (n.kind == GraphNodeKind::kError)
    js = std::to_string(n.layer) + "_-1-" + std::to_string(n.position);
  if (n.kind == GraphNodeKind::kLogit)
    js = "L_" + std::to_string(n.index) + "-" + std::to_string(n.position);
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
  if (logit)
    out << "null";
  else
    JsonNumber(out, pruned.cumulative[i]);
  out << ",\"activation\":";
  if (n.kind == GraphNodeKind::kFeature)
    JsonNumber(out, n.activation);
  else
    out << "null";
  out << "}";
}

}  // namespace

std::string GraphJson(const AttributionGraph& g, const GraphSelection& sel,
                      const Tokenizer& tokenizer) {
  std::ostringstream out;
  const int N = g.size();
  out << "{\"metadata\":{\"slug\":\"gpt2-graph\",\"scan\":\"gpt2-small-dun-chl-mlp-tc\","
         "\"transcoder_list\":[],"
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
  out << "},\"qParams\":{\"pinnedIds\":[],\"supernodes\":[],\"linkType\":\"both\",\"clickedId\":"
         "\"\",\"sg_pos\":\"\"},"
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
