// Choosing the next token from logits: greedy, temperature, top-k, top-p, with a random
// generator written out here (SplitMix64) so a seed gives the same tokens in every build.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace gpt2 {

struct SamplingParams {
  float temperature = 1.0f;  // 0 means greedy (argmax; ties to the lowest id)
  int top_k = 0;             // 0 = no limit
  float top_p = 1.0f;        // 1 = no limit; keeps the smallest prefix with mass >= top_p
  uint64_t seed = 0;
};

// SplitMix64 (Steele, Lea, Flood 2014): state += 0x9E3779B97F4A7C15, then the mix below.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  double NextDouble();  // uniform in [0, 1): top 53 bits of Next() / 2^53
 private:
  uint64_t state_;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}
  // Order of operations: temperature scales logits; top-k keeps the k largest (ties by lower
  // id); softmax; top-p keeps the smallest prefix, by descending probability, whose mass
  // reaches top_p; renormalise; draw u = NextDouble() and walk the kept tokens in descending
  // probability order until the cumulative mass passes u * total.
  int Sample(const float* logits, int n_vocab);

 private:
  SamplingParams params_;
  Rng rng_;
  std::vector<int> order_;     // scratch, reused between calls
  std::vector<double> probs_;  // double so top-p and the draw agree in every build
};

}  // namespace gpt2
