#include "model/top_k.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

namespace gpt2 {

void KeepLargest(const float* x, int k, std::vector<int>* order) {
  auto before = [x](int a, int b) { return RanksBefore(x, a, b); };
  const size_t keep =
      static_cast<size_t>(std::min<int64_t>(std::max(k, 0), static_cast<int64_t>(order->size())));
  // The whole order (the sampler without top-k): introsort beats partial_sort's heap sort.
  if (keep == order->size())
    std::sort(order->begin(), order->end(), before);
  else
    std::partial_sort(order->begin(), order->begin() + keep, order->end(), before);
  order->resize(keep);
}

void LargestIndices(const float* x, int n, int k, std::vector<int>* order) {
  // Few of many (a feature's 10 of 50,257 tokens, the sampler's top 40): one pass keeps only the
  // indices not below t, the k-th ranked value of those kept so far, ranking them (KeepLargest)
  // when they pile up. The answer is KeepLargest's over every index: an index below t ranks
  // after the k kept ones at or above it (NaN ranks as -inf, and while t is -inf nothing is
  // below it), and KeepLargest's order is total, so the candidates' order does not matter.
  constexpr int kSpan = 64;  // indices tested at once: most spans of a long x hold none
  if (k <= 0 || int64_t(k) * 16 > n) {
    order->resize(n);
    std::iota(order->begin(), order->end(), 0);
    KeepLargest(x, k, order);
    return;
  }
  order->clear();
  const size_t pile = size_t(k) * 4 + kSpan;
  float t = -std::numeric_limits<float>::infinity();
  for (int i0 = 0; i0 < n; i0 += kSpan) {
    const int i1 = std::min(n, i0 + kSpan);
    bool any = false;
    for (int i = i0; i < i1; ++i) any |= !(x[i] < t);
    if (!any) continue;
    for (int i = i0; i < i1; ++i) {
      if (!(x[i] < t)) order->push_back(i);
    }
    if (order->size() >= pile) {
      KeepLargest(x, k, order);
      const float last = x[order->back()];
      t = std::isnan(last) ? -std::numeric_limits<float>::infinity() : last;
    }
  }
  KeepLargest(x, k, order);
}

}  // namespace gpt2
