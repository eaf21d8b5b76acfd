// The attribution graph of a prompt (graph/graph.h) as a lab experiment over a Conversation:
// ids = [50256] + the prompt's ids, built on the conversation's session and given back through
// its Scope. Re-pruning with other thresholds needs no rebuild: PruneAttributionGraph(graph, ...).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "lab/conversation.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

// The graph is the plain model's: gpt2::Error if the conversation runs under interventions, or
// for an empty prompt, one past the context (with the BOS) or a target out of range.
AttributionGraph AttributionGraphOf(Conversation& c, const TranscoderSet& transcoders,
                                    const std::vector<int>& prompt, const GraphOptions& options);

// The same graph in steps (graph.h AttributionGraphBuild), for the page: the constructor makes
// the checks AttributionGraphOf makes, runs the real model and gives the conversation back at
// once (the steps only read the model and run the backward on the session's threads); each
// Continue() is one batch of feature rows. `transcoders` must outlive the job.
class GraphJob {
 public:
  GraphJob(Conversation& c, const TranscoderSet& transcoders, const std::vector<int>& prompt,
           const GraphOptions& options);
  GraphProgress Continue();  // runs the next step
  GraphProgress progress() const { return build_->progress(); }
  bool done() const { return build_->done(); }
  AttributionGraph Finish() { return build_->Finish(); }

 private:
  std::unique_ptr<AttributionGraphBuild> build_;
};

// The graph's feature nodes named by circuit-tracer's node ids ("L_F_P", as GraphJson writes
// them): gpt2::Error naming an id that is not a feature node of this graph.
std::vector<int> GraphFeatureNodes(const AttributionGraph& graph, const std::vector<std::string>& node_ids);

// The check of a graph: feature nodes set to `value` (0: ablated), the graph's predicted change
// of a logit node's quantity (graph.h PredictedLogitChange) beside the exact change of the same
// quantity, logit[tok] - mean_v logit[v] at the last position, from a re-run of the real model
// with the clamps as stream edits (sae/transcoders.h TranscoderClampEdits), given back through the
// conversation's Scope. logit < 0: the first logit node (the most probable token).
struct GraphCheck {
  double predicted = 0;
  double exact = 0;
};
GraphCheck CheckGraph(Conversation& c, const TranscoderSet& transcoders, const AttributionGraph& graph,
                      const std::vector<int>& nodes, float value, int logit = -1);

// A feature's card: its activation at each of ids (the graph's, the BOS first) on the plain
// model, and the k tokens its decoder promotes and suppresses most, W_dec[f] through ln_f's
// weight and the unembedding (Sae::LogitWeights, Neuronpedia's logit weights), by the one top-k
// (model/top_k.h). gpt2::Error for a block without a transcoder or a feature out of range.
struct GraphFeatureCard {
  std::vector<float> activations;  // [ids.size()]
  std::vector<int> promoted, suppressed;  // [k] token ids, strongest first
  std::vector<float> promoted_weights, suppressed_weights;
};
GraphFeatureCard FeatureCardOf(Conversation& c, const TranscoderSet& transcoders, const std::vector<int>& ids,
                               int layer, int feature, int k);

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
GraphSelection SelectGraph(const AttributionGraph& graph, double node_threshold, double edge_threshold, bool prune);

// circuit-tracer's graph file (its frontend/graph_models.py Model, as create_graph_files writes
// it, so Neuronpedia's and circuit-tracer's viewers open it), one line:
//   {"metadata": {"slug", "scan", "transcoder_list", "prompt_tokens", "prompt", "node_threshold",
//                 "replacement_score", "completeness_score"},
//    "qParams": {...}, "nodes": [{"node_id", "feature", "layer", "ctx_idx", "feature_type",
//    "token_prob", "is_target_logit", "run_idx", "reverse_ctx_idx", "jsNodeId", "clerp",
//    "influence", "activation"}], "links": [{"source", "target", "weight"}]}
// The one writer of the CLI's `gpt2 graph --json` and the page's engine.
std::string GraphJson(const AttributionGraph& graph, const GraphSelection& selection, const Tokenizer& tokenizer);

// The type names of the file's feature_type ("cross layer transcoder", ...).
const char* GraphFeatureType(GraphNodeKind kind);

}  // namespace gpt2
