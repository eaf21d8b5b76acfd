// The attribution graph of a prompt (graph/graph.h) as a lab experiment over a Conversation:
// ids = [50256] + the prompt's ids, built on the conversation's session and given back through
// its Scope. Re-pruning with other thresholds needs no rebuild: PruneAttributionGraph(graph, ...).
#pragma once

#include <vector>

#include "graph/graph.h"
#include "lab/conversation.h"

namespace gpt2 {

// The graph is the plain model's: gpt2::Error if the conversation runs under interventions, or
// for an empty prompt, one past the context (with the BOS) or a target out of range.
AttributionGraph AttributionGraphOf(Conversation& c, const TranscoderSet& transcoders,
                                    const std::vector<int>& prompt, const GraphOptions& options);

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

}  // namespace gpt2
