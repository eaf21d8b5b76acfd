// The sampler against independent facts: published SplitMix64 outputs, softmax frequencies,
// and the definitions of top-k and top-p.
#include "model/sampler.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <numeric>
#include <vector>

#include "model/thread_pool.h"

namespace gpt2 {
namespace {

TEST_CASE("SplitMix64 matches the published reference outputs for seed 0", "[sampling]") {
  // Outputs of the reference splitmix64.c (Vigna) seeded with 0.
  Rng rng(0);
  CHECK(rng.Next() == 0xE220A8397B1DCDAFull);
  CHECK(rng.Next() == 0x6E789E6AA1B965F4ull);
  CHECK(rng.Next() == 0x06C45D188009454Full);
}

TEST_CASE("Greedy picks the argmax and breaks ties toward the lower id", "[sampling]") {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  Sampler greedy(SamplingParams{0.0f, 0, 1.0f, 7});
  CHECK(greedy.Sample(logits.data(), 5) == 1);
  Sampler top1(SamplingParams{1.0f, 1, 1.0f, 7});
  CHECK(top1.Sample(logits.data(), 5) == 1);
}

std::vector<double> Softmax(const std::vector<float>& logits, double temperature) {
  double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) total += p[i] = std::exp((logits[i] - max) / temperature);
  for (double& v : p) v /= total;
  return p;
}

TEST_CASE("Sampling frequencies follow softmax(logits / T)", "[sampling]") {
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -0.5f, 1.5f};
  for (float temperature : {1.0f, 0.7f, 1.8f}) {
    INFO("temperature " << temperature);
    const std::vector<double> expected = Softmax(logits, temperature);
    Sampler sampler(SamplingParams{temperature, 0, 1.0f, 12345});
    constexpr int kDraws = 200000;
    std::vector<int> counts(logits.size());
    for (int i = 0; i < kDraws; ++i) counts[sampler.Sample(logits.data(), 5)]++;
    for (size_t i = 0; i < logits.size(); ++i) {
      // 5 standard deviations of a binomial count: fails only if the sampler is wrong.
      const double sd = std::sqrt(kDraws * expected[i] * (1 - expected[i]));
      CHECK(std::abs(counts[i] - kDraws * expected[i]) < 5 * sd + 1);
    }
  }
}

TEST_CASE("Top-k never samples outside the k largest logits", "[sampling]") {
  const std::vector<float> logits = {0.1f, 3.0f, 0.2f, 2.9f, 0.3f, 2.8f, 0.0f};
  Sampler sampler(SamplingParams{5.0f, 3, 1.0f, 99});  // high temperature flattens the rest
  std::map<int, int> seen;
  for (int i = 0; i < 20000; ++i) seen[sampler.Sample(logits.data(), 7)]++;
  for (const auto& kv : seen) CHECK((kv.first == 1 || kv.first == 3 || kv.first == 5));
  CHECK(seen.size() == 3);
}

TEST_CASE("Top-p keeps the smallest prefix reaching the mass and renormalises", "[sampling]") {
  // Probabilities at T=1: about 0.64, 0.24, 0.09, 0.03.
  const std::vector<float> logits = {3.0f, 2.0f, 1.0f, 0.0f};
  const std::vector<double> p = Softmax(logits, 1.0);
  Sampler sampler(SamplingParams{1.0f, 0, 0.8f, 5});  // 0.64 < 0.8 <= 0.64 + 0.24
  constexpr int kDraws = 100000;
  std::vector<int> counts(4);
  for (int i = 0; i < kDraws; ++i) counts[sampler.Sample(logits.data(), 4)]++;
  CHECK(counts[2] == 0);
  CHECK(counts[3] == 0);
  const double expected0 = p[0] / (p[0] + p[1]);
  const double sd = std::sqrt(kDraws * expected0 * (1 - expected0));
  CHECK(std::abs(counts[0] - kDraws * expected0) < 5 * sd);
}

TEST_CASE("The same seed gives the same tokens; another seed does not", "[sampling]") {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(i * 0.37f) * 3;
  auto run = [&](uint64_t seed) {
    Sampler s(SamplingParams{0.9f, 40, 0.95f, seed});
    std::vector<int> ids;
    for (int i = 0; i < 50; ++i) ids.push_back(s.Sample(logits.data(), 1000));
    return ids;
  };
  CHECK(run(42) == run(42));
  CHECK(run(42) != run(43));
}

TEST_CASE("ThreadPool runs every task exactly once", "[sampling][threads]") {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int round = 0; round < 50; ++round) {
      std::vector<int> hits(97);
      pool.ParallelFor(97, [&](int64_t i) { hits[i]++; });
      CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
    }
  }
}

}  // namespace
}  // namespace gpt2
