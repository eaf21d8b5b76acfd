#include "model/top_k.h"

#include <algorithm>
#include <cstdint>
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
  order->resize(n);
  std::iota(order->begin(), order->end(), 0);
  KeepLargest(x, k, order);
}

}  // namespace gpt2
