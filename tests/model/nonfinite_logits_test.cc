// Logits that are not numbers: a model file with NaN or huge weights (which the fuzzers make,
// and a damaged download can hold) gives NaN or infinite logits. The sampler must still return
// an id in range, never a NaN one while a finite logit exists; its sort needs a strict weak
// order, which a plain `>` on NaNs is not (std::sort may then read out of bounds).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "model/sampler.h"

namespace {

TEST_CASE("the sampler ranks NaN logits last and stays in range", "[sampling][hostile]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const int V = 50257;
  std::vector<float> logits(V);
  for (int i = 0; i < V; ++i) logits[i] = (i % 3 == 0) ? nan : std::sin(0.1f * i);
  logits[7] = 5.0f;  // clearly the best finite logit

  for (const gpt2::SamplingParams& p :
       {gpt2::SamplingParams{0.0f, 0, 1.0f, 1}, gpt2::SamplingParams{1.0f, 0, 1.0f, 2},
        gpt2::SamplingParams{0.8f, 40, 0.95f, 3}, gpt2::SamplingParams{1.5f, 0, 0.5f, 4}}) {
    gpt2::Sampler sampler(p);
    for (int k = 0; k < 20; ++k) {
      const int id = sampler.Sample(logits.data(), V);
      REQUIRE(id >= 0);
      REQUIRE(id < V);
      CHECK(!std::isnan(logits[id]));
    }
  }
  gpt2::Sampler greedy(gpt2::SamplingParams{0.0f, 0, 1.0f, 1});
  CHECK(greedy.Sample(logits.data(), V) == 7);

  // All NaN, or infinities of both signs: any id in range, no crash.
  std::vector<float> all_nan(V, nan);
  std::vector<float> infinite(V);
  for (int i = 0; i < V; ++i) infinite[i] = i % 2 ? inf : -inf;
  for (const std::vector<float>* l : {&all_nan, &infinite}) {
    gpt2::Sampler sampler(gpt2::SamplingParams{0.8f, 40, 0.95f, 5});
    const int id = sampler.Sample(l->data(), V);
    CHECK(id >= 0);
    CHECK(id < V);
  }
}

}  // namespace
