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

}  // namespace gpt2
