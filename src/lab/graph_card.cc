#include "lab/graph_card.h"

#include <string>

#include "base/error.h"
#include "model/acts.h"
#include "model/top_k.h"

namespace gpt2 {

GraphFeatureCard FeatureCardOf(Conversation& c, const TranscoderSet& transcoders,
                               const std::vector<int>& ids, int layer, int feature, int k) {
  const Sae* tc = transcoders.block(layer);
  if (tc == nullptr) throw Error("The transcoders have no block " + std::to_string(layer) + ".");
  tc->CheckFeature(feature);
  if (k < 0) throw Error("k must be >= 0.");
  c.CheckPrompt(static_cast<int>(ids.size()));
  for (int id : ids) c.RequireToken(id);
  const int T = static_cast<int>(ids.size()), V = c.config().n_vocab;
  GraphFeatureCard card;
  // What the transcoder reads: the stream after the block's attention.
  Acts run;
  c.WithRestore([&] {
    Session& s = c.UnrecordedSession();
    s.Reset();
    RunOptions options;
    RecordActs(c.config(), Keep{{Hook::kResidMid}}, run, options);
    s.Prefill(ids.data(), T, options);
    return 0;
  });
  card.activations.resize(T);
  SaeScratch scratch;
  tc->EncodeFeatures(run.blocks[layer].resid_mid.data(), T, &feature, 1, card.activations.data(),
                     nullptr, scratch);
  std::vector<float> w = tc->LogitWeights(c.model(), {feature});
  ExtremeIndices(w.data(), V, k, &card.promoted, &card.suppressed);
  for (int i : card.promoted) card.promoted_weights.push_back(w[i]);
  for (int i : card.suppressed) card.suppressed_weights.push_back(w[i]);
  return card;
}

}  // namespace gpt2
