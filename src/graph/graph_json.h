// An attribution graph (graph.h) as circuit-tracer's graph file (its
// utils/create_graph_files.py: create_used_nodes_and_edges and the frontend/graph_models.py
// Model it writes), which Neuronpedia's and circuit-tracer's viewers open; the nodes' ids and
// feature types as that file names them.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

// circuit-tracer's node_id of node i ("L_F_P", "L_-1_P" for errors, "E_ID_P", "{n_layer+1}_ID_P";
// its graph_models.py, whose older releases wrote errors as "0_L_P", the same id as feature L of
// block 0 there).
std::string GraphNodeId(const AttributionGraph& graph, int i);

// The graph's feature nodes named by their node ids ("L_F_P"): gpt2::Error naming an id that is
// not a feature node of this graph.
std::vector<int> GraphFeatureNodes(const AttributionGraph& graph,
                                   const std::vector<std::string>& node_ids);

// The type names of the file's feature_type ("cross layer transcoder", ...).
const char* GraphFeatureType(GraphNodeKind kind);

// What a graph file shows: with pruning (PruneAttributionGraph at the thresholds) the kept nodes
// that have a kept edge (circuit-tracer's create_used_nodes_and_edges: features and errors
// without one are left out; every embedding and logit stays) and the kept edges between them;
// without pruning every node and every nonzero edge. The scores and influences are reported
// either way.
struct GraphSelection {
  PrunedGraph pruned;
  bool prune = true;
  double node_threshold = 0.8, edge_threshold = 0.98;
  std::vector<char> used;  // [N]
  bool edge(const AttributionGraph& g, int target, int source) const;
};
GraphSelection SelectGraph(const AttributionGraph& graph, double node_threshold,
                           double edge_threshold, bool prune);

// circuit-tracer's graph file (its frontend/graph_models.py Model, as create_graph_files writes
// it), one line:
//   {"metadata": {"slug", "scan", "transcoder_list", "prompt_tokens", "prompt", "node_threshold",
//                 "replacement_score", "completeness_score"},
//    "qParams": {...}, "nodes": [{"node_id", "feature", "layer", "ctx_idx", "feature_type",
//    "token_prob", "is_target_logit", "run_idx", "reverse_ctx_idx", "jsNodeId", "clerp",
//    "influence", "activation"}], "links": [{"source", "target", "weight"}]}
// The one writer of the CLI's `gpt2 graph --json` and the page's engine.
std::string GraphJson(const AttributionGraph& graph, const GraphSelection& selection,
                      const Tokenizer& tokenizer);

}  // namespace gpt2
