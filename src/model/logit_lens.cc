// The logit lens (nostalgebraist, 2020): decode each block's residual stream with the model's
// own final LayerNorm and unembedding.
#include <algorithm>
#include <vector>

#include "base/error.h"
#include "model/capture.h"
#include "model/model.h"

namespace gpt2 {

std::vector<LensEntry> LogitLens(const Model& model,
                                 const std::vector<std::vector<float>>& residuals, int T, int pos0,
                                 int top_k) {
  const Config& c = model.config();
  const int64_t C = c.n_embd, V = c.n_vocab;
  if (top_k < 1) top_k = 1;
  if (top_k > V) top_k = static_cast<int>(V);
  std::vector<float> normed(C), logits(V);
  std::vector<LensEntry> entries;
  entries.reserve(residuals.size() * T);
  for (size_t layer = 0; layer < residuals.size(); ++layer) {
    if (residuals[layer].size() != size_t(T) * C) {
      throw Error("logit lens: residual of layer " + std::to_string(layer) + " has the wrong size");
    }
    for (int t = 0; t < T; ++t) {
      LayerNorm(residuals[layer].data() + size_t(t) * C, model.ln_f_g, model.ln_f_b, c.ln_eps, C,
                normed.data());
      MatMul(normed.data(), 1, model.output, nullptr, logits.data(), 0, V);
      LensEntry e;
      e.layer = static_cast<int>(layer);
      e.position = pos0 + t;
      e.top_ids.resize(top_k);
      e.top_probs.resize(top_k);
      TopProbabilities(logits.data(), V, top_k, e.top_ids.data(), e.top_probs.data());
      entries.push_back(std::move(e));
    }
  }
  return entries;
}

}  // namespace gpt2
