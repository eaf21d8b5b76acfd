// An attribution graph (circuit-tracer's Graph, safety-research/circuit-tracer graph.py) and what
// its graph.py does to one: prune_graph, compute_graph_scores and the influence they rest on, and
// the graph's prediction of an intervention. Built by graph/attribute.h (circuit-tracer's
// attribute()) through the replacement model (graph/replacement.h); written as circuit-tracer's
// JSON by graph/graph_json.h.
//
// Nodes, in circuit-tracer's order (the adjacency's rows and columns):
//   features    (layer, position >= 1, feature) with acts > 0: the transcoder of `layer` on the
//               real stream; a feature at position 0 (the BOS) is no node (circuit-tracer's
//               zero_bos), its write stays in the constant part with the biases
//   errors      err[l, p] for every block and position, layer-major (a block without a
//               transcoder: its whole MLP output is the error)
//   embeddings  wte[id_p] + wpe[p] for every position
//   logits      the chosen tokens at the last position
// Edge s -> t = (what s writes) . d(t's quantity)/d(the stream where s writes): a feature writes
// acts W_dec[f] into its block's MLP output, an error err[l, p] there, an embedding into the
// stream entering block 0. A feature's quantity is its pre-activation without b_enc,
// n(resid_mid[l, p]) . W_enc[:, f]; a logit's is ln_f(final stream at the last position) .
// (W_U[:, tok] - mean_v W_U[:, v]). adjacency[t][s] holds it (row: target).
#pragma once

#include <cstdint>
#include <vector>

namespace gpt2 {

enum class GraphNodeKind { kFeature, kError, kEmbedding, kLogit };

struct GraphNode {
  GraphNodeKind kind;
  int layer;  // features, errors; -1 for embeddings, n_layer for logits
  int position;
  int index;         // feature id (features), token id (embeddings, logits), -1 (errors)
  float activation;  // features: acts; logits: the token's probability; else 0
};

struct AttributionGraph {
  std::vector<int> ids;
  int n_layer = 0;
  int n_pos = 0;
  int n_features = 0;    // selected: the first n_features nodes
  int n_logits = 0;      // the last n_logits nodes
  int64_t n_active = 0;  // active features found, selected or not
  std::vector<GraphNode> nodes;
  std::vector<float> adjacency;  // [N, N], N = nodes.size(): adjacency[t * N + s]
  int size() const { return static_cast<int>(nodes.size()); }
  float edge(int target, int source) const { return adjacency[int64_t(target) * size() + source]; }
  int error_begin() const { return n_features; }
  int embedding_begin() const { return n_features + n_layer * n_pos; }
  int logit_begin() const { return size() - n_logits; }
};

// circuit-tracer's prune_graph and graph scores over a built graph; thresholds in [0, 1]
// (gpt2::Error otherwise). Cheap next to building (a few products of N x N), so the page
// re-prunes with new thresholds from the same AttributionGraph without recomputing it.
struct PrunedGraph {
  std::vector<char> node_mask;    // [N]
  std::vector<char> edge_mask;    // [N, N] as adjacency
  std::vector<double> influence;  // [N] node influence on the logits (row-normalised |A|)
  std::vector<double>
      cumulative;  // [N] circuit-tracer's cumulative_scores (the JSON's "influence")
  double replacement_score = 0;
  double completeness_score = 0;
};
PrunedGraph PruneAttributionGraph(const AttributionGraph& graph, double node_threshold = 0.8,
                                  double edge_threshold = 0.98);

// The graph's prediction of logit node `logit`'s quantity changing when the feature nodes
// `chosen` are set to `value` (0: ablated): their activations move by value - act, and the
// linear frozen model carries that along the feature -> feature edges (an edge s -> t is
// act_s times the unit effect, so a change d_s adds edge * d_s / act_s to t's pre-activation,
// and an active feature passes it on with slope 1, never crossing ReLU's kink) to the logit.
// The full adjacency, not a pruned one: pruning drops edges for display, and a prediction
// without them would test the pruning instead of the graph; features not selected
// (max_feature_nodes) are absent from the graph and so stay fixed. gpt2::Error for a node that is
// not a feature, or `logit` not a logit node.
double PredictedLogitChange(const AttributionGraph& graph, const std::vector<int>& chosen,
                            float value, int logit);

}  // namespace gpt2
