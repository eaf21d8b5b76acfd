// model/top_k.h against a stable sort of every index (the definition written out): descending,
// equal values by lower index, NaN below -inf's equals by index, k clamped; the smallest as the
// largest of -x.
#include "model/top_k.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace gpt2_test {

TEST_CASE("KeepLargest: descending, ties to the lower index, NaN last, k clamped", "[sampling]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(3);
  for (int n : {1, 2, 7, 100, 1000}) {
    std::vector<float> x(n);
    for (float& v : x) v = static_cast<float>(static_cast<int>(rng() % 9) - 4);  // many ties
    if (n > 2) x[1] = nan, x[n - 1] = -inf;
    std::vector<int> want(n);
    std::iota(want.begin(), want.end(), 0);
    auto rank = [&](int i) { return std::isnan(x[i]) ? -inf : x[i]; };
    std::stable_sort(want.begin(), want.end(), [&](int a, int b) { return rank(a) > rank(b); });
    for (int k : {-1, 0, 1, 3, n - 1, n, n + 5}) {
      INFO("n " << n << " k " << k);
      std::vector<int> got;
      gpt2::LargestIndices(x.data(), n, k, &got);
      const int keep = std::min(std::max(k, 0), n);
      CHECK(got == std::vector<int>(want.begin(), want.begin() + keep));
      // Candidates: the odd indices only.
      std::vector<int> odd, want_odd;
      for (int i = 1; i < n; i += 2) odd.push_back(i);
      for (int i : want) {
        if (i % 2 == 1 && static_cast<int>(want_odd.size()) < k) want_odd.push_back(i);
      }
      gpt2::KeepLargest(x.data(), k, &odd);
      CHECK(odd == want_odd);
    }
  }
}

TEST_CASE("LargestIndices: few of many, as a sort of every index", "[sampling]") {
  // Its pass keeps only indices not below the k-th value kept so far: values that rise (each
  // index a new candidate), fall, tie in long runs, NaN and infinities among them.
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(7);
  for (int n : {50, 63, 64, 65, 4097, 50257}) {
    for (int kind = 0; kind < 5; ++kind) {
      std::vector<float> x(n);
      for (int i = 0; i < n; ++i) {
        switch (kind) {
          case 0:
            x[i] = std::uniform_real_distribution<float>(-1, 1)(rng);
            break;
          case 1:
            x[i] = static_cast<float>(i);
            break;
          case 2:
            x[i] = static_cast<float>(-i);
            break;
          case 3:
            x[i] = static_cast<float>(static_cast<int>(rng() % 3));
            break;
          default:
            x[i] = rng() % 5 == 0 ? nan : (rng() % 7 == 0 ? -inf : -0.0f);
            break;
        }
      }
      if (kind == 0) x[n / 2] = nan, x[n / 3] = inf, x[n - 1] = inf;
      std::vector<int> want(n);
      std::iota(want.begin(), want.end(), 0);
      auto rank = [&](int i) { return std::isnan(x[i]) ? -inf : x[i]; };
      std::stable_sort(want.begin(), want.end(), [&](int a, int b) { return rank(a) > rank(b); });
      for (int k : {1, 3, 10, 40}) {
        INFO("n " << n << " kind " << kind << " k " << k);
        std::vector<int> got = {5, 6};  // a reused buffer
        gpt2::LargestIndices(x.data(), n, k, &got);
        CHECK(got == std::vector<int>(want.begin(), want.begin() + std::min(k, n)));
        // Both sides in one pass: the smallest are, by definition, the largest of -x.
        std::vector<float> negated(n);
        for (int i = 0; i < n; ++i) negated[i] = -x[i];
        std::vector<int> want_smallest, largest = {1}, smallest = {2, 3};
        gpt2::LargestIndices(negated.data(), n, k, &want_smallest);
        gpt2::ExtremeIndices(x.data(), n, k, &largest, &smallest);
        CHECK(largest == got);
        CHECK(smallest == want_smallest);
        gpt2::ExtremeIndices(x.data(), n, k, nullptr, &smallest);
        CHECK(smallest == want_smallest);
        // With bounds: the same over the indices not beyond them (the value ranked k / 2 or 2k on
        // each side, so that fewer than k or k pass; NaN always does).
        std::vector<int> all_smallest;
        gpt2::LargestIndices(negated.data(), n, n, &all_smallest);
        for (int b : {k / 2, std::min(2 * k, n - 1)}) {
          const float high_bound = x[want[b]], low_bound = x[all_smallest[b]];
          std::vector<int> want_high, want_low;
          for (int i : want) {
            if (!(x[i] < high_bound) && static_cast<int>(want_high.size()) < k)
              want_high.push_back(i);
          }
          for (int i : all_smallest) {
            if (!(x[i] > low_bound) && static_cast<int>(want_low.size()) < k) want_low.push_back(i);
          }
          gpt2::ExtremeIndices(x.data(), n, k, &largest, &smallest, high_bound, low_bound);
          CHECK(largest == want_high);
          CHECK(smallest == want_low);
        }
      }
    }
  }
}

}  // namespace gpt2_test
