// A feature's card, for a feature of a computed attribution graph (graph.h): what it reads and
// what it writes, on the conversation's plain model.
#pragma once

#include <vector>

#include "lab/conversation.h"
#include "sae/transcoders.h"

namespace gpt2 {

// The feature's activation at each of ids (the graph's, the BOS first) on the plain model, and
// the k tokens its decoder promotes and suppresses most, W_dec[f] through ln_f's weight and the
// unembedding (Sae::LogitWeights, Neuronpedia's logit weights), by the one top-k
// (model/top_k.h). gpt2::Error for a block without a transcoder or a feature out of range.
struct GraphFeatureCard {
  std::vector<float> activations;         // [ids.size()]
  std::vector<int> promoted, suppressed;  // [k] token ids, strongest first
  std::vector<float> promoted_weights, suppressed_weights;
};
GraphFeatureCard FeatureCardOf(Conversation& c, const TranscoderSet& transcoders,
                               const std::vector<int>& ids, int layer, int feature, int k);

}  // namespace gpt2
