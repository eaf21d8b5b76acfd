// The one top-k selection of the engine: the sampler's top-k, TopK SAEs' surviving features,
// the lab's most active features and a feature's promoted and suppressed tokens.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

namespace gpt2 {

// The order KeepLargest sorts by: x[a] before x[b] if larger, or equal and a < b, NaN ranked
// as -inf (`>` on NaN is no strict weak order, and std::partial_sort given one may read out of
// bounds). It is total, so the answer does not depend on the sort: every build gives the same.
inline bool RanksBefore(const float* x, int a, int b) {
  const float ka = std::isnan(x[a]) ? -std::numeric_limits<float>::infinity() : x[a];
  const float kb = std::isnan(x[b]) ? -std::numeric_limits<float>::infinity() : x[b];
  return ka > kb || (ka == kb && a < b);
}

// Reorders the candidate indices in `order` so that the k whose x[i] are largest come first,
// descending, equal values by lower index, and shrinks `order` to them (k clamped to
// [0, order->size()]), by RanksBefore.
void KeepLargest(const float* x, int k, std::vector<int>* order);

// KeepLargest over every index of x [n] (order is resized to n first: a caller's reused buffer).
void LargestIndices(const float* x, int n, int k, std::vector<int>* order);

}  // namespace gpt2
