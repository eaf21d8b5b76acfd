// Direct logit attribution (model/attribution.h) on a conversation: the conversation starts over
// as the ids attributed, run once by the attribution's own prefill (captured if capture is on).
#pragma once

#include <vector>

#include "lab/conversation.h"
#include "model/attribution.h"

namespace gpt2 {

// Of `ids` under the conversation's interventions; the conversation is then ids.
Attribution Attribute(Conversation& c, const std::vector<int>& ids, int position, int target,
                      int contrast);

// The same for the conversation's tokens under iv (mean ablation: means over its prompt), which
// become the conversation's interventions; the conversation stays those tokens.
Attribution AttributeConversation(Conversation& c, const LabInterventions& iv, int position,
                                  int target);

}  // namespace gpt2
