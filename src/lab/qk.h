// QK attribution (graph/qk.h) as a lab experiment over a Conversation: on the plain model over a
// graph's ids, given back through the conversation's Scope.
#pragma once

#include <vector>

#include "graph/qk.h"
#include "lab/conversation.h"

namespace gpt2 {

// ids: the BOS first, as the graph's. gpt2::Error under interventions, for a block, head or
// position out of range, a key after the query, or k < 1.
QkAttribution QkAttributionOf(Conversation& c, const TranscoderSet& transcoders,
                              const std::vector<int>& ids, const ScoreSpec& spec, int k);

}  // namespace gpt2
