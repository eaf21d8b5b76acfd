#include "model/top_k.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>

namespace gpt2 {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kSpan = 64;  // indices tested at once: most spans of a long x hold none

// kLargest: RanksBefore's order. Otherwise its mirror, the order of RanksBefore on -x: x[a] before
// x[b] if smaller, or equal and a < b, NaN ranked as +inf.
template <bool kLargest>
bool Before(const float* x, int a, int b) {
  if constexpr (kLargest) {
    return RanksBefore(x, a, b);
  } else {
    const float ka = std::isnan(x[a]) ? kInf : x[a];
    const float kb = std::isnan(x[b]) ? kInf : x[b];
    return ka < kb || (ka == kb && a < b);
  }
}

template <bool kLargest>
void Keep(const float* x, int k, std::vector<int>* order) {
  auto before = [x](int a, int b) { return Before<kLargest>(x, a, b); };
  const size_t keep =
      static_cast<size_t>(std::min<int64_t>(std::max(k, 0), static_cast<int64_t>(order->size())));
  // The whole order (the sampler without top-k): introsort beats partial_sort's heap sort.
  if (keep == order->size())
    std::sort(order->begin(), order->end(), before);
  else
    std::partial_sort(order->begin(), order->begin() + keep, order->end(), before);
  order->resize(keep);
}

// One side of ExtremeIndices' pass over x: keeps only the indices not beyond t, the k-th ranked
// value of those kept so far (below it for the largest, above it for the smallest), ranking them
// (Keep) when they pile up. The answer is Keep's over every index: an index beyond t ranks after
// the k kept ones (NaN is never beyond, and while t is the side's infinity nothing is), and the
// order is total, so the candidates' order does not matter.
template <bool kLargest>
class Kept {
 public:
  Kept(const float* x, int k, float bound, std::vector<int>* order)
      : x_(x), k_(k), pile_(size_t(k) * 4 + kSpan), order_(order), t_(bound) {
    order_->clear();
  }

  void Span(int i0, int i1) {
    int any = 0;  // an int, not a bool: GCC vectorizes this sum and not a bool's |=
    for (int i = i0; i < i1; ++i) any += !Beyond(x_[i]);
    if (any == 0) return;
    for (int i = i0; i < i1; ++i) {
      if (!Beyond(x_[i])) order_->push_back(i);
    }
    if (order_->size() >= pile_) {
      Keep<kLargest>(x_, k_, order_);
      const float last = x_[order_->back()];
      t_ = std::isnan(last) ? kStart : last;
    }
  }

  void Finish() { Keep<kLargest>(x_, k_, order_); }

 private:
  static constexpr float kStart = kLargest ? -kInf : kInf;
  bool Beyond(float v) const { return kLargest ? v < t_ : v > t_; }

  const float* x_;
  int k_;
  size_t pile_;
  std::vector<int>* order_;
  float t_;
};

template <bool kLargest>
void KeepAll(const float* x, int n, int k, float bound, std::vector<int>* order) {
  order->clear();
  for (int i = 0; i < n; ++i) {
    if (!(kLargest ? x[i] < bound : x[i] > bound)) order->push_back(i);
  }
  Keep<kLargest>(x, k, order);
}

}  // namespace

void KeepLargest(const float* x, int k, std::vector<int>* order) { Keep<true>(x, k, order); }

void ExtremeIndices(const float* x, int n, int k, std::vector<int>* largest,
                    std::vector<int>* smallest, float high_bound, float low_bound) {
  // Few of many (a feature's 10 of 50,257 tokens, the sampler's top 40): one pass over x for
  // both sides (Kept); many of few: the whole order.
  if (k <= 0 || int64_t(k) * 16 > n) {
    if (largest != nullptr) KeepAll<true>(x, n, k, high_bound, largest);
    if (smallest != nullptr) KeepAll<false>(x, n, k, low_bound, smallest);
    return;
  }
  std::optional<Kept<true>> high;
  std::optional<Kept<false>> low;
  if (largest != nullptr) high.emplace(x, k, high_bound, largest);
  if (smallest != nullptr) low.emplace(x, k, low_bound, smallest);
  for (int i0 = 0; i0 < n; i0 += kSpan) {
    const int i1 = std::min(n, i0 + kSpan);
    if (high) high->Span(i0, i1);
    if (low) low->Span(i0, i1);
  }
  if (high) high->Finish();
  if (low) low->Finish();
}

void LargestIndices(const float* x, int n, int k, std::vector<int>* order) {
  ExtremeIndices(x, n, k, order, nullptr);
}

}  // namespace gpt2
