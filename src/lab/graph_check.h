// The check of a computed attribution graph (graph.h) on the conversation: does the graph predict
// what the model does when its features are set? The graph's predicted change of a logit node's
// quantity (graph/graph.h PredictedLogitChange) beside the exact change from a re-run of the real
// model with the features clamped through their transcoders.
#pragma once

#include <vector>

#include "graph/graph.h"
#include "lab/conversation.h"
#include "sae/transcoders.h"

namespace gpt2 {

// Feature nodes set to `value` (0: ablated); the exact change is of the same quantity,
// logit[tok] - mean_v logit[v] at the last position, from a re-run of the real model with the
// clamps as stream edits (sae/transcoders.h TranscoderClampEdits), given back through the
// conversation's Scope. logit < 0: the first logit node (the most probable token).
struct GraphCheck {
  double predicted = 0;
  double exact = 0;
};
GraphCheck CheckGraph(Conversation& c, const TranscoderSet& transcoders,
                      const AttributionGraph& graph, const std::vector<int>& nodes, float value,
                      int logit = -1);

}  // namespace gpt2
