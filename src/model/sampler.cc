#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "model/top_k.h"

namespace gpt2 {

uint64_t Rng::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::NextDouble() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }

int Sampler::Sample(const float* logits, int n_vocab) {
  // Higher logit first; equal logits by lower id, so every build orders them the same way; NaN
  // (from a model file with NaN or huge weights) ranks as -inf (model/top_k.h).
  auto key = [logits](int i) {
    return std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i];
  };
  if (params_.temperature <= 0.0f || params_.top_k == 1) {
    int best = 0;
    for (int i = 1; i < n_vocab; ++i) {
      if (RanksBefore(logits, i, best)) best = i;
    }
    return best;
  }
  int kept = params_.top_k > 0 && params_.top_k < n_vocab ? params_.top_k : n_vocab;
  LargestIndices(logits, n_vocab, kept, &order_);
  // Softmax over the kept tokens in double, at the given temperature.
  probs_.resize(kept);
  const double inv_t = 1.0 / params_.temperature;
  // All -inf (or NaN): every kept token equally likely rather than 0/0.
  const double max_logit = std::isinf(key(order_[0])) ? 0.0 : key(order_[0]);
  double total = 0;
  for (int i = 0; i < kept; ++i) {
    const double p =
        std::isinf(key(order_[0])) ? 1.0 : std::exp((key(order_[i]) - max_logit) * inv_t);
    probs_[i] = p;
    total += p;
  }
  if (params_.top_p < 1.0f) {
    double mass = 0;
    int i = 0;
    while (i < kept) {
      mass += probs_[i] / total;
      ++i;
      if (mass >= params_.top_p) break;
    }
    kept = std::max(i, 1);
    total = 0;
    for (int j = 0; j < kept; ++j) total += probs_[j];
  }
  const double target = rng_.NextDouble() * total;
  double cumulative = 0;
  for (int i = 0; i < kept; ++i) {
    cumulative += probs_[i];
    if (cumulative > target) return order_[i];
  }
  return order_[kept - 1];
}

}  // namespace gpt2
