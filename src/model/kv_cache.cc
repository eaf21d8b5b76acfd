#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>

namespace gpt2 {

namespace {

// The 8-bit cache keeps values in pairs of positions.
int64_t Capacity(Config::KvCache format, int64_t positions) {
  return format == Config::KvCache::kQ8_0 ? (positions + 1) / 2 * 2 : positions;
}

// Head i's first `count` elements of `from` (heads `from_head` apart) to the same place of a
// head `to_head` apart in `to`.
template <typename T>
void CopyHeads(const KvVector<T>& from, int64_t from_head, KvVector<T>& to, int64_t to_head,
               int64_t heads, int64_t count) {
  if (from.empty()) return;
  for (int64_t i = 0; i < heads; ++i) {
    std::memcpy(to.data() + i * to_head, from.data() + i * from_head, size_t(count) * sizeof(T));
  }
}

}  // namespace

KvCache::KvCache(const Config& c, int64_t positions, Parts parts)
    : format_(c.kv_cache),
      values_(parts == Parts::kKeysAndValues),
      n_layer_(c.n_layer),
      n_head_(c.n_head),
      head_dim_(c.head_dim()),
      capacity_(Capacity(c.kv_cache, positions)),
      scale_(c.attn_scale()) {
  Allocate();
}

void KvCache::Allocate() {
  const size_t heads = size_t(n_layer_) * size_t(n_head_);
  const size_t kept = values_ ? 1 : 0;
  switch (format_) {
    case Config::KvCache::kF32:
      k32_.resize(heads * HeadNumbers());
      v32_.resize(kept * k32_.size());
      break;
    case Config::KvCache::kF16:
      k16_.resize(heads * HeadNumbers());
      v16_.resize(kept * k16_.size());
      break;
    case Config::KvCache::kQ8_0:
      kq_.resize(heads * HeadQuants());
      vq_.resize(kept * kq_.size());
      kd_.resize(heads * HeadScales());
      vd_.resize(kept * kd_.size());
      break;
  }
}

void KvCache::Grow(int64_t positions) {
  if (positions <= capacity_) return;
  KvCache grown;
  grown.format_ = format_;
  grown.values_ = values_;
  grown.n_layer_ = n_layer_;
  grown.n_head_ = n_head_;
  grown.head_dim_ = head_dim_;
  grown.capacity_ = Capacity(format_, positions);
  grown.scale_ = scale_;
  grown.Allocate();
  const int64_t heads = int64_t{n_layer_} * n_head_;
  // f32 and f16 rows, and 8-bit keys (key j's blocks at j * nb * 32), are position-major in a
  // head: its positions so far are one prefix of it.
  CopyHeads(k32_, HeadNumbers(), grown.k32_, grown.HeadNumbers(), heads, HeadNumbers());
  CopyHeads(v32_, HeadNumbers(), grown.v32_, grown.HeadNumbers(), heads, HeadNumbers());
  CopyHeads(k16_, HeadNumbers(), grown.k16_, grown.HeadNumbers(), heads, HeadNumbers());
  CopyHeads(v16_, HeadNumbers(), grown.v16_, grown.HeadNumbers(), heads, HeadNumbers());
  CopyHeads(kq_, HeadQuants(), grown.kq_, grown.HeadQuants(), heads, HeadQuants());
  // 8-bit values and every 8-bit scale are block-major, strided by the capacity: block by block.
  // (An empty cache has nothing to copy, and memcpy from its null data is undefined even for 0.)
  const int64_t nb = format_ == Config::KvCache::kQ8_0 && capacity_ > 0 ? KvBlocks(head_dim_) : 0;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t from = b * capacity_, to = b * grown.capacity_;
    for (int64_t i = 0; i < heads; ++i) {
      std::memcpy(grown.kd_.data() + i * grown.HeadScales() + to,
                  kd_.data() + i * HeadScales() + from, size_t(capacity_) * sizeof(uint16_t));
      if (!values_) continue;
      std::memcpy(grown.vd_.data() + i * grown.HeadScales() + to,
                  vd_.data() + i * HeadScales() + from, size_t(capacity_) * sizeof(uint16_t));
      std::memcpy(grown.vq_.data() + i * grown.HeadQuants() + to * kKvBlock,
                  vq_.data() + i * HeadQuants() + from * kKvBlock, size_t(capacity_) * kKvBlock);
    }
  }
  *this = std::move(grown);
}

KvHeadQ8 KvCache::Keys8(int64_t head_index) const {
  return {kq_.data() + head_index * HeadQuants(), kd_.data() + head_index * HeadScales(),
          capacity_};
}

KvHeadQ8 KvCache::Values8(int64_t head_index) const {
  if (!values_) return {};
  return {vq_.data() + head_index * HeadQuants(), vd_.data() + head_index * HeadScales(),
          capacity_};
}

void KvCache::Store(int layer, int64_t head, int64_t pos0, int64_t n, const float* k,
                    const float* v, int64_t stride) {
  const int64_t i = HeadIndex(layer, head), D = head_dim_;
  switch (format_) {
    case Config::KvCache::kF32: {
      float* keys = k32_.data() + i * HeadNumbers() + pos0 * D;
      float* values = values_ ? v32_.data() + i * HeadNumbers() + pos0 * D : nullptr;
      for (int64_t t = 0; t < n; ++t) {
        std::copy_n(k + t * stride, D, keys + t * D);
        if (values != nullptr) std::copy_n(v + t * stride, D, values + t * D);
      }
      break;
    }
    case Config::KvCache::kF16: {
      uint16_t* keys = k16_.data() + i * HeadNumbers() + pos0 * D;
      uint16_t* values = values_ ? v16_.data() + i * HeadNumbers() + pos0 * D : nullptr;
      for (int64_t t = 0; t < n; ++t) {
        F32ToF16Saturated(k + t * stride, keys + t * D, D);
        if (values != nullptr) F32ToF16Saturated(v + t * stride, values + t * D, D);
      }
      break;
    }
    case Config::KvCache::kQ8_0: {
      int8_t* kq = kq_.data() + i * HeadQuants();
      uint16_t* kd = kd_.data() + i * HeadScales();
      int8_t* vq = values_ ? vq_.data() + i * HeadQuants() : nullptr;
      uint16_t* vd = values_ ? vd_.data() + i * HeadScales() : nullptr;
      for (int64_t t = 0; t < n; ++t) {
        StoreKeyQ8(k + t * stride, D, pos0 + t, kq, kd, capacity_);
        if (vq != nullptr) StoreValueQ8(v + t * stride, D, pos0 + t, vq, vd, capacity_);
      }
      break;
    }
  }
}

namespace {

// Query t of io at position pos0 + t over keys 0..pos0 + t of one head's f32 or f16 rows.
template <typename T>
void AttendRows(const T* k, const T* v, int64_t head_dim, float scale, int64_t pos0, int64_t n,
                const HeadQueries& io, float* unused_out) {
  for (int64_t t = 0; t < n; ++t) {
    AttentionHead(io.q + t * io.q_stride, k, v, head_dim, pos0 + t + 1, head_dim, scale,
                  io.scores != nullptr ? io.scores + t * io.scores_stride : nullptr,
                  io.probs + t * io.probs_stride,
                  io.out != nullptr ? io.out + t * io.out_stride : unused_out);
  }
}

}  // namespace

void KvCache::Attend(int layer, int64_t head, int64_t pos0, int64_t n,
                     const HeadQueries& io) const {
  const int64_t i = HeadIndex(layer, head), D = head_dim_;
  // The f32 and f16 kernels always sum values: a keys-only cache gives them its keys as values
  // (the probabilities do not depend on them) and a scratch row for the sum.
  static thread_local std::vector<float> unused_out;
  if (io.out == nullptr && format_ != Config::KvCache::kQ8_0) unused_out.resize(size_t(D));
  switch (format_) {
    case Config::KvCache::kF32: {
      const float* k = k32_.data() + i * HeadNumbers();
      AttendRows(k, values_ ? v32_.data() + i * HeadNumbers() : k, D, scale_, pos0, n, io,
                 unused_out.data());
      break;
    }
    case Config::KvCache::kF16: {
      const uint16_t* k = k16_.data() + i * HeadNumbers();
      const uint16_t* v = values_ ? v16_.data() + i * HeadNumbers() : k;
      if (n < kWidenKvFrom) {
        AttendRows(k, v, D, scale_, pos0, n, io, unused_out.data());
        break;
      }
      // A prefill's queries of one head all read the same keys and values: widened once, the
      // f32 kernel gives the f16 kernel's bits without converting every key for every query.
      static thread_local std::vector<float> kv32;  // [2, n_keys, D]: keys, then values
      const size_t numbers = size_t(pos0 + n) * D;
      if (kv32.size() < 2 * numbers) kv32.resize(2 * numbers);
      F16ToF32(k, kv32.data(), int64_t(numbers));
      if (values_) F16ToF32(v, kv32.data() + numbers, int64_t(numbers));
      AttendRows(kv32.data(), kv32.data() + (values_ ? numbers : 0), D, scale_, pos0, n, io,
                 unused_out.data());
      break;
    }
    case Config::KvCache::kQ8_0: {
      const KvHeadQ8 keys = Keys8(i), values = io.out != nullptr ? Values8(i) : KvHeadQ8{};
      for (int64_t t = 0; t < n; ++t) {
        AttentionHead(io.q + t * io.q_stride, keys, values, pos0 + t + 1, D, scale_,
                      io.scores != nullptr ? io.scores + t * io.scores_stride : nullptr,
                      io.probs + t * io.probs_stride,
                      io.out != nullptr ? io.out + t * io.out_stride : nullptr);
      }
      break;
    }
  }
}

}  // namespace gpt2
