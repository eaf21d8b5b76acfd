// The KV cache: every block's keys and values of the positions run so far, in the number format
// Config::kv_cache names (f32, f16 bits, or kernels.h's 8-bit rows), and attention over them.
// The Session keeps keys and values; the capture store (capture.h) keeps keys only, in the same
// format, so the attention rows it recomputes are the run's to the bit. The format lives here
// alone: callers store float rows and get attention back, through kernels.h's AttentionHead.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/aligned.h"
#include "kernels/kernels.h"
#include "model/config.h"

namespace gpt2 {

// Storage on a cache line (base/aligned.h) whose elements a resize leaves uninitialized: no
// kernel reads a position before it is written (the 8-bit AttentionHead weighs the unused partner
// of an odd last value with 0), and zeroing GPT-2 small's 20 MB 8-bit cache faulted in every page
// of it at load (~60 ms of a cached reload on the AMD EPYC guest, BENCHMARKS-history.md "Where a
// cached reload's time went"); now only the pages of positions in use are touched.
template <typename T>
using KvVector = CacheLineVector<T, NewElements::kUninitialized>;

// One head's queries for KvCache::Attend, and where its attention goes. Query t (at position
// pos0 + t) is read from q + t * q_stride; its AttentionHead outputs go to out + t * out_stride
// ([head_dim]; out nullptr: values unused, only probabilities), probs + t * probs_stride
// ([pos0 + t + 1]; stride 0: one scratch row each query overwrites) and, if scores is set,
// scores + t * scores_stride (before softmax, for the activation observer).
struct HeadQueries {
  const float* q = nullptr;
  int64_t q_stride = 0;
  float* out = nullptr;
  int64_t out_stride = 0;
  float* probs = nullptr;
  int64_t probs_stride = 0;
  float* scores = nullptr;
  int64_t scores_stride = 0;
};

class KvCache {
 public:
  enum class Parts { kKeysAndValues, kKeys };

  KvCache() = default;  // holds nothing; assign a real one before use
  // Room for `positions` positions of every head of every block of c (the 8-bit format rounds
  // them up to even: it keeps values in pairs of positions). Head-major, so one head's keys for
  // all positions are one contiguous stream.
  KvCache(const Config& c, int64_t positions, Parts parts = Parts::kKeysAndValues);

  Config::KvCache format() const { return format_; }
  int64_t capacity() const { return capacity_; }
  // Room for at least `positions`, keeping every position stored so far (the 8-bit layout's
  // scales are strided by the capacity, so the cache moves).
  void Grow(int64_t positions);

  // Head `head` of block `layer`: its keys (and values, unless the cache keeps keys only: v is
  // then ignored) of positions [pos0, pos0 + n), rounded to the format. Row t of each is read
  // from k + t * stride and v + t * stride ([head_dim]).
  void Store(int layer, int64_t head, int64_t pos0, int64_t n, const float* k, const float* v,
             int64_t stride);
  // Causal attention of that head's n queries at positions [pos0, pos0 + n): query t sees the
  // stored keys 0..pos0 + t, scaled by c.attn_scale() (Hugging Face GPT2Attention). Each query
  // is one AttentionHead call of the format; from kWidenKvFrom queries on, an f16 head is
  // widened to f32 once for all of them, which gives the f16 kernel's bits (kernels.h). A cache
  // of keys only takes out == nullptr. Reads only: threads may attend different heads at once,
  // or store and attend a head each.
  void Attend(int layer, int64_t head, int64_t pos0, int64_t n, const HeadQueries& io) const;

  // Queries per call from which Attend widens a head's f16 keys and values to f32 once (one
  // vector pass over them) instead of per query in the kernel (a vector pass each).
  static constexpr int64_t kWidenKvFrom = 16;

 private:
  int64_t HeadIndex(int layer, int64_t head) const { return int64_t{layer} * n_head_ + head; }
  // Elements of one head's part of each buffer: f32/f16 numbers, 8-bit quants, 8-bit scales.
  int64_t HeadNumbers() const { return capacity_ * head_dim_; }
  int64_t HeadQuants() const { return capacity_ * KvBlocks(head_dim_) * kKvBlock; }
  int64_t HeadScales() const { return capacity_ * KvBlocks(head_dim_); }
  void Allocate();
  KvHeadQ8 Keys8(int64_t head_index) const;
  KvHeadQ8 Values8(int64_t head_index) const;

  Config::KvCache format_ = Config::KvCache::kF32;
  bool values_ = true;
  int n_layer_ = 0, n_head_ = 0;
  int64_t head_dim_ = 0, capacity_ = 0;
  float scale_ = 1.0f;
  // Only the format's buffers hold anything; keys-only caches leave the value buffers empty.
  KvVector<float> k32_, v32_;     // [L, H, capacity, D]
  KvVector<uint16_t> k16_, v16_;  // [L, H, capacity, D] f16 bits
  KvVector<int8_t> kq_, vq_;      // [L, H, HeadQuants()] 8-bit quants (kernels.h KvHeadQ8)
  KvVector<uint16_t> kd_, vd_;    // [L, H, HeadScales()] their f16 scales
};

}  // namespace gpt2
