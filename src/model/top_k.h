// The one top-k selection of the engine: the sampler's top-k, TopK SAEs' surviving features,
// the lab's most active features and a feature's promoted and suppressed tokens.
#pragma once

#include <vector>

namespace gpt2 {

// Reorders the candidate indices in `order` so that the k whose x[i] are largest come first,
// descending, equal values by lower index, and shrinks `order` to them (k clamped to
// [0, order->size()]). NaN ranks below every number (-inf): `>` on NaN is no strict weak order,
// and std::partial_sort given one may read out of bounds. As the order is total, the answer does
// not depend on the sort: every build gives the same.
void KeepLargest(const float* x, int k, std::vector<int>* order);

// KeepLargest over every index of x [n] (order is resized to n first: a caller's reused buffer).
void LargestIndices(const float* x, int n, int k, std::vector<int>* order);

}  // namespace gpt2
