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

// In one pass over x [n]: `largest` gets LargestIndices' answer, `smallest` its mirror, the
// LargestIndices of -x: the k smallest, ascending, equal values by lower index, NaN ranked as
// +inf (a feature's promoted and suppressed tokens). Either may be null. With bounds, only the
// indices not beyond them take part: x[i] < high_bound is left out of `largest`, x[i] >
// low_bound out of `smallest` (NaN never is), so either may hold fewer than k: for x in pieces,
// the bound being the k-th value found in the pieces before.
void ExtremeIndices(const float* x, int n, int k, std::vector<int>* largest,
                    std::vector<int>* smallest,
                    float high_bound = -std::numeric_limits<float>::infinity(),
                    float low_bound = std::numeric_limits<float>::infinity());

}  // namespace gpt2
