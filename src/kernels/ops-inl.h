// Per-target LayerNorm, Gelu, Softmax, AddInPlace and AttentionHead (kernels.h). Included once
// per Highway target by kernels.cc, after matmul-inl.h (the 8-bit attention quantizes its query
// with matmul-int8-inl.h's QuantizeBlock). Leftover elements (n % lanes) go through a lane-sized
// stack buffer so they get exactly the same arithmetic as the full vectors; Highway 1.0.3 has no
// LoadN and its MaskedLoad may read past the end on 128-bit targets.
#if defined(GPT2_KERNELS_OPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GPT2_KERNELS_OPS_INL_H_
#undef GPT2_KERNELS_OPS_INL_H_
#else
#define GPT2_KERNELS_OPS_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/internal.h"
#include "kernels/kernels.h"
#include "kernels/matmul-int8-inl.h"
#include "kernels/reference.h"

HWY_BEFORE_NAMESPACE();
namespace gpt2 {
namespace HWY_NAMESPACE {
namespace ops {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kLanes = hn::MaxLanes(DF());

HWY_INLINE float Sum(DF df, VF v) { return hn::GetLane(hn::SumOfLanes(df, v)); }

// Highway's Exp (valid for inputs up to +104; below -104 it gives 0), NaN lanes passed through
// as NaN. Exp converts its input to int32 for the exponent, which on EMU128 (plain C++) is
// undefined behaviour for NaN (UBSan reported it when the fuzzer gave a model NaN weights); the
// hardware targets define that conversion. So NaN lanes go in as 0 and come out as NaN again.
HWY_INLINE VF ExpKeepNaN(DF df, VF v) {
  const auto nan = hn::IsNaN(v);
  return hn::IfThenElse(nan, v, hn::Exp(df, hn::IfThenZeroElse(nan, v)));
}

// Sum of x[0, n), two accumulators to halve the add chain.
HWY_INLINE float SumOf(const float* HWY_RESTRICT x, int64_t n) {
  const DF df;
  VF a0 = hn::Zero(df), a1 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 2 * static_cast<int64_t>(kLanes) <= n; i += 2 * kLanes) {
    a0 = hn::Add(a0, hn::LoadU(df, x + i));
    a1 = hn::Add(a1, hn::LoadU(df, x + i + kLanes));
  }
  for (; i + static_cast<int64_t>(kLanes) <= n; i += kLanes) a0 = hn::Add(a0, hn::LoadU(df, x + i));
  float sum = Sum(df, hn::Add(a0, a1));
  for (; i < n; ++i) sum += x[i];
  return sum;
}

// Applies func (VF -> VF) to x[0, n) in place, the tail through a padded buffer.
template <class Func>
HWY_INLINE void TransformInPlace(float* HWY_RESTRICT x, int64_t n, const Func& func) {
  const DF df;
  int64_t i = 0;
  for (; i + static_cast<int64_t>(kLanes) <= n; i += kLanes) {
    hn::StoreU(func(hn::LoadU(df, x + i)), df, x + i);
  }
  if (i < n) {
    HWY_ALIGN float buffer[kLanes] = {};
    const size_t rest = static_cast<size_t>(n - i);
    std::memcpy(buffer, x + i, rest * sizeof(float));
    hn::Store(func(hn::Load(df, buffer)), df, buffer);
    std::memcpy(x + i, buffer, rest * sizeof(float));
  }
}

#if HWY_TARGET != HWY_SCALAR
// v folded to 128 bits by adding its halves: the lane sums are unchanged (exactly so for
// integers).
template <class D>
HWY_INLINE hn::Vec<hn::Full128<hn::TFromD<D>>> FoldTo128(D d, hn::Vec<D> v) {
  if constexpr (hn::MaxLanes(D()) <= 4) {
    return v;
  } else {
    const hn::Half<D> dh;
    return FoldTo128(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
}

// The lane sums of 128-bit a, b, c, d (float or int32) as the 4 lanes of one vector: a 4x4
// transpose-add, instead of 4 horizontal reductions (each a chain of shuffles on 128-bit
// targets).
template <class V4>
HWY_INLINE V4 SumsOf4x128(V4 a, V4 b, V4 c, V4 d) {
  const hn::DFromV<V4> d4;
  // ab = (a0+a2, b0+b2, a1+a3, b1+b3), cd likewise.
  const auto ab = hn::Add(hn::InterleaveLower(d4, a, b), hn::InterleaveUpper(d4, a, b));
  const auto cd = hn::Add(hn::InterleaveLower(d4, c, d), hn::InterleaveUpper(d4, c, d));
  return hn::Add(hn::ConcatLowerLower(d4, cd, ab), hn::ConcatUpperUpper(d4, cd, ab));
}
HWY_INLINE hn::Vec<hn::Full128<float>> SumsOf4(VF a, VF b, VF c, VF d) {
  return SumsOf4x128(FoldTo128(DF(), a), FoldTo128(DF(), b), FoldTo128(DF(), c),
                     FoldTo128(DF(), d));
}
#endif

}  // namespace ops

// torch.nn.LayerNorm: two passes (mean, then the centred variance) as PyTorch does, so large
// means do not cancel the variance.
HWY_NOINLINE void LayerNormKernel(const float* x, const float* gamma, const float* beta, float eps,
                                  int64_t n, float* y) {
  namespace hn = hwy::HWY_NAMESPACE;
  using ops::kLanes;
  if (n <= 0) return;
  const ops::DF df;
  const float mean = ops::SumOf(x, n) / static_cast<float>(n);
  const ops::VF mean_v = hn::Set(df, mean);
  ops::VF a0 = hn::Zero(df), a1 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 2 * static_cast<int64_t>(kLanes) <= n; i += 2 * kLanes) {
    const ops::VF d0 = hn::Sub(hn::LoadU(df, x + i), mean_v);
    const ops::VF d1 = hn::Sub(hn::LoadU(df, x + i + kLanes), mean_v);
    a0 = hn::MulAdd(d0, d0, a0);
    a1 = hn::MulAdd(d1, d1, a1);
  }
  for (; i + static_cast<int64_t>(kLanes) <= n; i += kLanes) {
    const ops::VF d0 = hn::Sub(hn::LoadU(df, x + i), mean_v);
    a0 = hn::MulAdd(d0, d0, a0);
  }
  float sq = ops::Sum(df, hn::Add(a0, a1));
  for (; i < n; ++i) sq += (x[i] - mean) * (x[i] - mean);
  const float inv_std = 1.0f / std::sqrt(sq / static_cast<float>(n) + eps);
  const ops::VF inv_v = hn::Set(df, inv_std);
  // y may alias x: each element is read before it is written.
  for (i = 0; i + static_cast<int64_t>(kLanes) <= n; i += kLanes) {
    const ops::VF normed = hn::Mul(hn::Sub(hn::LoadU(df, x + i), mean_v), inv_v);
    hn::StoreU(hn::MulAdd(normed, hn::LoadU(df, gamma + i), hn::LoadU(df, beta + i)), df, y + i);
  }
  for (; i < n; ++i) y[i] = (x[i] - mean) * inv_std * gamma[i] + beta[i];
}

// GPT-2's gelu_new (OpenAI encoder/model.py: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))),
// computed through the identity 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)): one Exp and one Div,
// and no cancellation in 1 + tanh(u) for negative x. -2u is clamped to 88 (< log(FLT_MAX)) so
// Exp stays finite.
HWY_NOINLINE void GeluKernel(float* x, int64_t n) {
  namespace hn = hwy::HWY_NAMESPACE;
  const ops::DF df;
  const ops::VF k_minus_2_sqrt_2_over_pi = hn::Set(df, -2.0f * 0.7978845608028654f);
  const ops::VF k_cubic = hn::Set(df, 0.044715f);
  const ops::VF k_one = hn::Set(df, 1.0f);
  const ops::VF k_clamp = hn::Set(df, 88.0f);
  ops::TransformInPlace(x, n, [&](ops::VF v) {
    const ops::VF inner = hn::MulAdd(hn::Mul(k_cubic, v), hn::Mul(v, v), v);  // x + c x^3
    const ops::VF minus_2u = hn::Mul(k_minus_2_sqrt_2_over_pi, inner);
    const ops::VF y = hn::Div(v, hn::Add(k_one, ops::ExpKeepNaN(df, hn::Min(minus_2u, k_clamp))));
    // Beyond the clamp (x < ~-10) the true value is below 1e-37: return 0 rather than x / e^88,
    // which is not small when x itself is huge.
    return hn::IfThenZeroElse(hn::Gt(minus_2u, k_clamp), y);
  });
}

// Softmax with max subtraction (exp never overflows; -inf entries give 0).
HWY_NOINLINE void SoftmaxKernel(float* x, int64_t n) {
  namespace hn = hwy::HWY_NAMESPACE;
  using ops::kLanes;
  if (n <= 0) return;
  const ops::DF df;
  ops::VF max_v = hn::Set(df, -std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + static_cast<int64_t>(kLanes) <= n; i += kLanes) {
    max_v = hn::Max(max_v, hn::LoadU(df, x + i));
  }
  float max = hn::GetLane(hn::MaxOfLanes(df, max_v));
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  const ops::VF shift = hn::Set(df, max);
  ops::TransformInPlace(x, n, [&](ops::VF v) { return ops::ExpKeepNaN(df, hn::Sub(v, shift)); });
  const ops::VF inv_sum = hn::Set(df, 1.0f / ops::SumOf(x, n));
  ops::TransformInPlace(x, n, [&](ops::VF v) { return hn::Mul(v, inv_sum); });
}

HWY_NOINLINE void AddInPlaceKernel(float* y, const float* x, int64_t n) {
  namespace hn = hwy::HWY_NAMESPACE;
  using ops::kLanes;
  const ops::DF df;
  int64_t i = 0;
  for (; i + static_cast<int64_t>(kLanes) <= n; i += kLanes) {
    hn::StoreU(hn::Add(hn::LoadU(df, y + i), hn::LoadU(df, x + i)), df, y + i);
  }
  for (; i < n; ++i) y[i] += x[i];
}

// ---- Keys and values as f32 or as f16 bits (the KV cache of a quantized model) ---------------
namespace kv {

namespace hn = hwy::HWY_NAMESPACE;

// An f16 value's bits sign-extended to 32, shifted left 13 and bits 28-30 cleared are the f32
// whose value is the half's times 2^-112 (exponent and mantissa land in the f32 fields, the
// sign in bit 31; a half subnormal becomes an f32 subnormal, exactly). 3 integer operations per
// vector (wasm: load16x4_s, shl, and) instead of Highway's f16 PromoteTo (~12 on targets without
// F16C). The 2^112 goes into the other factor of each product (the query, the probabilities),
// which makes every product, hence every sum, bit-equal to the f32 arithmetic on the decoded
// values. Infinite or NaN halves are not supported (they come out finite); the session stores
// only finite, saturated values. The same idea as matmul-decode-inl.h's ShiftedHalvesToF32, whose
// input is laid out differently (each half already in the upper 16 bits) and which multiplies.
constexpr float kHalfScale = 5.192296858534828e+33f;  // 2^112

// a * b + c as the vector code's MulAdd computes it (fused where the target has FMA): a plain
// C++ expression is fused or not at the compiler's choice, differently in the f32 and the f16
// copies of a loop, which would break their equality.
HWY_INLINE float MulAdd(float a, float b, float c) {
  const hn::CappedTag<float, 1> d1;
  return hn::GetLane(hn::MulAdd(hn::Set(d1, a), hn::Set(d1, b), hn::Set(d1, c)));
}
HWY_INLINE float ScalarKv(float x) { return x; }
HWY_INLINE float ScalarKv(uint16_t h) {
  const int32_t wide = static_cast<int16_t>(h);
  const uint32_t bits = (static_cast<uint32_t>(wide) << 13) & 0x8fffffffu;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
HWY_INLINE ops::VF LoadKv(ops::DF df, const float* HWY_RESTRICT p) { return hn::LoadU(df, p); }
// Lanes(df) halves at p (any float descriptor: the 8-bit cache's scales come 4 at a time).
template <class DF>
HWY_INLINE hn::Vec<DF> LoadKv(DF df, const uint16_t* HWY_RESTRICT p) {
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(df, ScalarKv(p[0]));
#else
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<int16_t, DF> di16;
  const auto wide = hn::PromoteTo(di32, hn::LoadU(di16, reinterpret_cast<const int16_t*>(p)));
  return hn::BitCast(
      df, hn::And(hn::ShiftLeft<13>(wide), hn::Set(di32, static_cast<int32_t>(0x8fffffffu))));
#endif
}
// The other factor of each product, times 2^112 for f16 keys or values (exact: a power of two).
HWY_INLINE ops::VF Fold(const float*, ops::VF x) { return x; }
HWY_INLINE ops::VF Fold(const uint16_t*, ops::VF x) {
  return hn::Mul(x, hn::Set(ops::DF(), kHalfScale));
}
HWY_INLINE float Fold(const float*, float x) { return x; }
HWY_INLINE float Fold(const uint16_t*, float x) { return x * kHalfScale; }

// dot(a, b) over n, two accumulators to halve the add chain.
template <typename T>
HWY_INLINE float Dot(const float* HWY_RESTRICT a, const T* HWY_RESTRICT b, int64_t n) {
  using ops::kLanes;
  const ops::DF df;
  ops::VF a0 = hn::Zero(df), a1 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 2 * static_cast<int64_t>(kLanes) <= n; i += 2 * kLanes) {
    a0 = hn::MulAdd(Fold(b, hn::LoadU(df, a + i)), LoadKv(df, b + i), a0);
    a1 = hn::MulAdd(Fold(b, hn::LoadU(df, a + i + kLanes)), LoadKv(df, b + i + kLanes), a1);
  }
  for (; i + static_cast<int64_t>(kLanes) <= n; i += kLanes) {
    a0 = hn::MulAdd(Fold(b, hn::LoadU(df, a + i)), LoadKv(df, b + i), a0);
  }
  float sum = ops::Sum(df, hn::Add(a0, a1));
  for (; i < n; ++i) sum = MulAdd(Fold(b, a[i]), ScalarKv(b[i]), sum);
  return sum;
}

// out[0, kVecs * lanes) = sum over keys i of probs[i] * v[i * kv_stride + (0, kVecs * lanes)]:
// the kVecs vectors of out stay in registers while the loop walks all keys, so each probs[i] is
// broadcast once per kVecs vectors of out, and out written once.
template <int64_t kVecs, typename T>
HWY_INLINE void WeightedValueSum(const float* HWY_RESTRICT probs, const T* HWY_RESTRICT v,
                                 int64_t kv_stride, int64_t n_keys, float* HWY_RESTRICT out) {
  const ops::DF df;
  constexpr int64_t kLanes = static_cast<int64_t>(ops::kLanes);
  ops::VF acc[kVecs];
  for (int64_t c = 0; c < kVecs; ++c) acc[c] = hn::Zero(df);
  for (int64_t i = 0; i < n_keys; ++i) {
    const T* HWY_RESTRICT vi = v + i * kv_stride;
    const ops::VF p = hn::Set(df, Fold(v, probs[i]));
    for (int64_t c = 0; c < kVecs; ++c) acc[c] = hn::MulAdd(p, LoadKv(df, vi + c * kLanes), acc[c]);
  }
  for (int64_t c = 0; c < kVecs; ++c) hn::StoreU(acc[c], df, out + c * kLanes);
}

}  // namespace kv

// One query against n_keys cached keys: scores, softmax, probability-weighted sum of values;
// keys and values f32 or f16 bits (T), the same arithmetic on the decoded values either way.
// Scores go 4 keys at a time: 4 independent accumulator chains, and one transpose-add instead
// of one horizontal sum per key. The 4 keys come from the 4 quarters of the key range (keys i,
// i + m, i + 2m, i + 3m for m = n_keys / 4): at long positions the keys come from memory, and a
// wasm loop reading one sequential stream gets ~7 GB/s on this project's machine against ~11
// with 4 streams (tests/kernels/attention_bench_test.cc, "whole KV cache"). Every key's score
// is the same arithmetic in the same order whichever quarter it is in, so the scores are those
// of 4 neighbouring keys at a time. The value sum (kv::WeightedValueSum) keeps up to 8 vectors of
// out in registers while it walks all keys, so each probs[j] is broadcast once per 8 vectors of
// out, and out written once per pass instead of once per key.
template <typename T>
HWY_INLINE void AttentionHeadImpl(const float* q, const T* k, const T* v, int64_t kv_stride,
                                  int64_t n_keys, int64_t head_dim, float scale, float* scores,
                                  float* probs, float* out) {
  namespace hn = hwy::HWY_NAMESPACE;
  using ops::kLanes;
  int64_t j = 0;
#if HWY_TARGET != HWY_SCALAR
  const ops::DF df;
  const int64_t full = head_dim - head_dim % static_cast<int64_t>(kLanes);
  const hn::Full128<float> d4;
  const int64_t m = n_keys / 4;
  // The value rows of the 4 keys are read here too (one element per 64-byte line, ORed into
  // `touched`, which a volatile store keeps; an element, not a vector, so that no read passes
  // the row's end), so the value sum below finds them in cache: a decode step's cache comes
  // from memory, and the value sum walks one stream, which the prefetcher alone does not keep
  // fed. Whole f16 cache at 1000 keys under Node: 39.6 -> 31 us a head. Only for f16 keys and
  // values, the decode case: the f32 ones (a prefill's widened chunk, an F32 model) are mostly
  // hot, where the extra loads cost ~13 %.
  constexpr bool kTouchValues = sizeof(T) == 2;
  constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(T));
  uint16_t touched = 0;
  for (int64_t i = 0; i < m; ++i) {
    const T* HWY_RESTRICT k0 = k + i * kv_stride;
    const T* HWY_RESTRICT k1 = k0 + m * kv_stride;
    const T* HWY_RESTRICT k2 = k1 + m * kv_stride;
    const T* HWY_RESTRICT k3 = k2 + m * kv_stride;
    if constexpr (kTouchValues) {
      for (int64_t r = 0; r < 4; ++r) {
        const T* HWY_RESTRICT row = v + (i + r * m) * kv_stride;
        for (int64_t e = 0; e < head_dim; e += kLine) touched |= row[e];
      }
    }
    ops::VF a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
    for (int64_t d = 0; d < full; d += kLanes) {
      const ops::VF qd = kv::Fold(k, hn::LoadU(df, q + d));
      a0 = hn::MulAdd(qd, kv::LoadKv(df, k0 + d), a0);
      a1 = hn::MulAdd(qd, kv::LoadKv(df, k1 + d), a1);
      a2 = hn::MulAdd(qd, kv::LoadKv(df, k2 + d), a2);
      a3 = hn::MulAdd(qd, kv::LoadKv(df, k3 + d), a3);
    }
    HWY_ALIGN float s[4];
    hn::Store(hn::Mul(ops::SumsOf4(a0, a1, a2, a3), hn::Set(d4, scale)), d4, s);
    for (int64_t d = full; d < head_dim; ++d) {
      s[0] = kv::MulAdd(kv::Fold(k, scale * q[d]), kv::ScalarKv(k0[d]), s[0]);
      s[1] = kv::MulAdd(kv::Fold(k, scale * q[d]), kv::ScalarKv(k1[d]), s[1]);
      s[2] = kv::MulAdd(kv::Fold(k, scale * q[d]), kv::ScalarKv(k2[d]), s[2]);
      s[3] = kv::MulAdd(kv::Fold(k, scale * q[d]), kv::ScalarKv(k3[d]), s[3]);
    }
    probs[i] = s[0];
    probs[i + m] = s[1];
    probs[i + 2 * m] = s[2];
    probs[i + 3 * m] = s[3];
  }
  j = 4 * m;
  if constexpr (kTouchValues) {
    [[maybe_unused]] volatile uint16_t kept = touched;
  }
#endif
  for (; j < n_keys; ++j) probs[j] = scale * kv::Dot(q, k + j * kv_stride, head_dim);
  if (scores != nullptr && n_keys > 0) std::memcpy(scores, probs, n_keys * sizeof(float));
  SoftmaxKernel(probs, n_keys);

  int64_t d = 0;
  for (; d + 8 * static_cast<int64_t>(kLanes) <= head_dim; d += 8 * kLanes) {
    kv::WeightedValueSum<8>(probs, v + d, kv_stride, n_keys, out + d);
  }
  for (; d + 4 * static_cast<int64_t>(kLanes) <= head_dim; d += 4 * kLanes) {
    kv::WeightedValueSum<4>(probs, v + d, kv_stride, n_keys, out + d);
  }
  for (; d + static_cast<int64_t>(kLanes) <= head_dim; d += kLanes) {
    kv::WeightedValueSum<1>(probs, v + d, kv_stride, n_keys, out + d);
  }
  for (; d < head_dim; ++d) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n_keys; ++i) {
      sum = kv::MulAdd(kv::Fold(v, probs[i]), kv::ScalarKv(v[i * kv_stride + d]), sum);
    }
    out[d] = sum;
  }
}

// ---- Keys and values in the 8-bit KV cache (kernels.h KvHeadQ8) ------------------------------
// The integer multiply-adds are ReorderWidenMulAccumulate of int16 (pmaddwd, i32x4.dot_i16x8_s)
// at the target's full width (a 32-number block is 4 vectors on WASM, 1 on AVX-512); lane i
// is a[2i] b[2i] + a[2i+1] b[2i+1] once RearrangeToOddPlusEven has joined its two sums (EMU128
// keeps even and odd products apart until then). The integer sums are exact whatever the width,
// and the float steps after them run on 128-bit vectors of 4 keys or elements everywhere, so
// every target gives the same bits.
#if HWY_TARGET != HWY_SCALAR
namespace kvq {

namespace hn = hwy::HWY_NAMESPACE;
using DI16 = hn::ScalableTag<int16_t>;
using DI32 = hn::Repartition<int32_t, DI16>;
using DF = hn::Repartition<float, DI16>;
using D4I32 = hn::Full128<int32_t>;
using DF4 = hn::Full128<float>;
using VI16 = hn::Vec<DI16>;
using VI32 = hn::Vec<DI32>;
using V4I32 = hn::Vec<D4I32>;
using VF4 = hn::Vec<DF4>;
constexpr int64_t kI16 = static_cast<int64_t>(hn::MaxLanes(DI16()));
static_assert(kKvBlock % kI16 == 0, "a block is whole int16 vectors");

// kI16 int8 at p sign-extended to int16.
HWY_INLINE VI16 LoadI8(const int8_t* HWY_RESTRICT p) {
#if HWY_TARGET == HWY_WASM
  return VI16{wasm_i16x8_load8x8(p)};
#else
  return hn::PromoteTo(DI16(), hn::LoadU(hn::Rebind<int8_t, DI16>(), p));
#endif
}

// 4 f16 scales at p (finite: the cache stores no others) as floats, exactly: kv::LoadKv gives
// the value times 2^-112, and the multiply by 2^112 is exact.
HWY_INLINE VF4 LoadScales(const uint16_t* HWY_RESTRICT p) {
  return hn::Mul(kv::LoadKv(DF4(), p), hn::Set(DF4(), kv::kHalfScale));
}

// The exact sum of a ReorderWidenMulAccumulate pair, its lanes folded to 4.
HWY_INLINE V4I32 Joined4(VI32 sum0, VI32 sum1) {
  return ops::FoldTo128(DI32(), hn::RearrangeToOddPlusEven(sum0, sum1));
}

// One block of a KV cache row or of a query, x[0, width) (width <= 32), to int16 quants q[32]
// (zeros past width) and the returned f16 scale bits, with kernels_internal::QuantizeKvBlock's
// rules, by the matmul's vector quantizer (QuantizeRowQ8_0's bits on every target).
HWY_INLINE uint16_t QuantizeBlockQ8(const float* HWY_RESTRICT x, int64_t width,
                                    int16_t* HWY_RESTRICT q) {
  HWY_ALIGN float padded[kKvBlock] = {};
  if (width < kKvBlock) {
    std::memcpy(padded, x, static_cast<size_t>(width) * sizeof(float));
    x = padded;
  }
  const DF df;
  auto diff = hn::Zero(df);  // stays 0 unless some x - x is NaN (x inf or NaN)
  for (int64_t i = 0; i < kKvBlock; i += static_cast<int64_t>(hn::Lanes(df))) {
    const auto v = hn::LoadU(df, x + i);
    diff = hn::Add(diff, hn::Sub(v, v));
  }
  if (!hn::AllTrue(df, hn::Eq(diff, hn::Zero(df)))) {
    std::fill_n(q, kKvBlock, int16_t{0});
    return 0;
  }
  uint16_t d;
  matmul::QuantizeBlock(x, q, d);
  return std::min<uint16_t>(d, 0x7bff);  // 65504
}

// Scores of 4 consecutive keys: k points at the first one's quants, kd at block 0 of its
// scales (block b's at kd + b * capacity); qq [nb * 32] the query's quants, qd [nb] its block
// scales times the attention scale.
HWY_INLINE VF4 Score4(const int16_t* HWY_RESTRICT qq, const float* HWY_RESTRICT qd,
                      const int8_t* HWY_RESTRICT k, const uint16_t* HWY_RESTRICT kd,
                      int64_t capacity, int64_t nb) {
  const DI32 di32;
  const int64_t row = nb * kKvBlock;
  VF4 s = hn::Zero(DF4());
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* HWY_RESTRICT k0 = k + b * kKvBlock;
    VI32 a0 = hn::Zero(di32), a1 = a0, a2 = a0, a3 = a0;
    VI32 o0 = a0, o1 = a0, o2 = a0, o3 = a0;
    for (int64_t g = 0; g < kKvBlock; g += kI16) {
      const VI16 qv = hn::LoadU(DI16(), qq + b * kKvBlock + g);
      a0 = hn::ReorderWidenMulAccumulate(di32, LoadI8(k0 + g), qv, a0, o0);
      a1 = hn::ReorderWidenMulAccumulate(di32, LoadI8(k0 + row + g), qv, a1, o1);
      a2 = hn::ReorderWidenMulAccumulate(di32, LoadI8(k0 + 2 * row + g), qv, a2, o2);
      a3 = hn::ReorderWidenMulAccumulate(di32, LoadI8(k0 + 3 * row + g), qv, a3, o3);
    }
    const V4I32 sums =
        ops::SumsOf4x128(Joined4(a0, o0), Joined4(a1, o1), Joined4(a2, o2), Joined4(a3, o3));
    const VF4 term = hn::Mul(hn::ConvertTo(DF4(), sums),
                             hn::Mul(hn::Set(DF4(), qd[b]), LoadScales(kd + b * capacity)));
    s = b == 0 ? term : hn::Add(s, term);
  }
  return s;
}

// Keys scored but the last n_keys % 4 go through Score4 too, from a zero-padded copy, so that
// every score gets the same float operations.
// values: the same keys' values, whose lines are read here too (one byte of each pair's 64-byte
// line per block) so that the value sum finds them in cache: in a decode step the cache comes
// from memory, and the value sum alone walks its two block streams slower than the prefetcher
// keeps up with. Whole 8-bit cache at 1000 keys under Node, best sweep: 25 -> 21 us a head
// from memory, +3-4 % when the cache is hot (a prefill's).
HWY_INLINE void ScoreKeys(const int16_t* qq, const float* qd, const KvHeadQ8& keys, int64_t n_keys,
                          int64_t nb, float* HWY_RESTRICT scores, const KvHeadQ8& values) {
  const int64_t row = nb * kKvBlock;
  int64_t j = 0;
  uint8_t touched = 0;
  for (; j + 4 <= n_keys; j += 4) {
    if (values.q != nullptr) {
      for (int64_t b = 0; b < nb; ++b) {
        const int8_t* HWY_RESTRICT pairs = values.q + (b * values.capacity + j) * kKvBlock;
        touched |= static_cast<uint8_t>(pairs[0] | pairs[2 * kKvBlock]);
      }
    }
    hn::StoreU(Score4(qq, qd, keys.q + j * row, keys.d + j, keys.capacity, nb), DF4(), scores + j);
  }
  [[maybe_unused]] volatile uint8_t kept = touched;
  if (j == n_keys) return;
  const int64_t rest = n_keys - j;
  static thread_local std::vector<int8_t> k_tail;    // [4, nb * 32]
  static thread_local std::vector<uint16_t> d_tail;  // [nb, 4]
  k_tail.assign(static_cast<size_t>(4 * row), 0);
  d_tail.assign(static_cast<size_t>(4 * nb), 0);
  std::memcpy(k_tail.data(), keys.q + j * row, static_cast<size_t>(rest * row));
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t r = 0; r < rest; ++r) d_tail[b * 4 + r] = keys.d[b * keys.capacity + j + r];
  }
  HWY_ALIGN float s[4];
  hn::Store(Score4(qq, qd, k_tail.data(), d_tail.data(), 4, nb), DF4(), s);
  std::memcpy(scores + j, s, static_cast<size_t>(rest) * sizeof(float));
}

}  // namespace kvq
#endif  // HWY_TARGET != HWY_SCALAR

HWY_NOINLINE void AttentionHeadQ8Kernel(const float* q, const KvHeadQ8& keys,
                                        const KvHeadQ8& values, int64_t n_keys, int64_t head_dim,
                                        float scale, float* scores, float* probs, float* out) {
#if HWY_TARGET == HWY_SCALAR
  // One lane, no 128-bit vectors to lay the arithmetic out on: the scalar twin.
  reference::AttentionHead(q, keys, values, n_keys, head_dim, scale, scores, probs, out);
#else
  namespace hn = hwy::HWY_NAMESPACE;
  using kvq::D4I32;
  using kvq::DF4;
  using kvq::DI16;
  using kvq::V4I32;
  using kvq::VF4;
  using kvq::VI16;
  using kvq::VI32;
  const int64_t nb = KvBlocks(head_dim);
  // The query as a key row: int16 quants and its block scales times `scale`.
  static thread_local std::vector<int16_t> qq;
  static thread_local std::vector<float> qd;
  qq.resize(static_cast<size_t>(nb * kKvBlock));
  qd.resize(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t width = std::min(kKvBlock, head_dim - b * kKvBlock);
    const uint16_t d = kvq::QuantizeBlockQ8(q + b * kKvBlock, width, qq.data() + b * kKvBlock);
    qd[static_cast<size_t>(b)] = kernels_internal::HalfToFloat(d) * scale;
  }
  if (n_keys <= 0) return;
  kvq::ScoreKeys(qq.data(), qd.data(), keys, n_keys, nb, probs,
                 out != nullptr ? values : KvHeadQ8{});
  if (scores != nullptr) std::memcpy(scores, probs, static_cast<size_t>(n_keys) * sizeof(float));
  SoftmaxKernel(probs, n_keys);
  if (out == nullptr) return;

  // The weights w[b, j] = probs[j] * v_d[b, j] and their largest W, then P = round(w * 32767 / W)
  // as int16 pairs of positions ([b][n_pad], n_pad even; the partner of the last odd key 0).
  const int64_t n_pad = (n_keys + 4) / 4 * 4;  // even, with room for a whole last vector
  static thread_local std::vector<float> w;
  static thread_local std::vector<int16_t> P;
  w.resize(static_cast<size_t>(nb * n_pad));
  P.resize(static_cast<size_t>(nb * n_pad));
  const DF4 df;
  VF4 w_max = hn::Zero(df);
  for (int64_t b = 0; b < nb; ++b) {
    const uint16_t* HWY_RESTRICT vd = values.d + b * values.capacity;
    float* HWY_RESTRICT wb = w.data() + b * n_pad;
    int64_t j = 0;
    for (; j + 4 <= n_keys; j += 4) {
      const VF4 x = hn::Mul(hn::LoadU(df, probs + j), kvq::LoadScales(vd + j));
      hn::StoreU(x, df, wb + j);
      w_max = hn::Max(w_max, x);
    }
    if (j < n_keys) {  // the last keys through the same multiply, zeros after them
      HWY_ALIGN float p4[4] = {};
      HWY_ALIGN uint16_t d4[4] = {};
      for (int64_t r = 0; j + r < n_keys; ++r) {
        p4[r] = probs[j + r];
        d4[r] = vd[j + r];
      }
      const VF4 x = hn::Mul(hn::Load(df, p4), kvq::LoadScales(d4));
      hn::StoreU(x, df, wb + j);
      w_max = hn::Max(w_max, x);
      j += 4;
    }
    for (; j < n_pad; ++j) wb[j] = 0.0f;
  }
  const float W = hn::GetLane(hn::MaxOfLanes(df, w_max));
  const float inv = W > 0.0f ? 32767.0f / W : 0.0f;
  // Rounding to nearest, ties to even, by adding 1.5 * 2^23: exact for 0 <= w * inv <= 32767.5.
  const VF4 v_inv = hn::Set(df, std::isfinite(inv) ? inv : 0.0f);
  const VF4 magic = hn::Set(df, 12582912.0f);
  const V4I32 magic_bits = hn::Set(D4I32(), 0x4B400000);
  const hn::Full64<int16_t> di16x4;
  for (int64_t e = 0; e < nb * n_pad; e += 4) {
    const VF4 x = hn::Add(hn::Mul(hn::LoadU(df, w.data() + e), v_inv), magic);
    const V4I32 r = hn::Sub(hn::BitCast(D4I32(), x), magic_bits);
    hn::StoreU(hn::DemoteTo(di16x4, r), di16x4, P.data() + e);
  }

  // The value sum, block by block: a pair's block (2 x 32 int8) is kVecs int16 vectors, whose
  // int32 sums over all pairs of keys become floats every 256 pairs (2 * 32767 * 128 * 256 <
  // 2^31).
  constexpr int64_t kVecs = 2 * kKvBlock / kvq::kI16;
  constexpr int64_t kF32 = kvq::kI16 / 2;  // channels (int32 and float lanes) per vector
  const kvq::DF dfv;
  const int64_t n_pairs = (n_keys + 1) / 2;
  const auto out_scale = hn::Set(dfv, W / 32767.0f);
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* HWY_RESTRICT vb = values.q + b * values.capacity * kKvBlock;
    const int16_t* HWY_RESTRICT pb = P.data() + b * n_pad;
    // The runs' float sums stay in memory, out of the registers the inner loop needs.
    HWY_ALIGN float f[kKvBlock] = {};
    for (int64_t m0 = 0; m0 < n_pairs; m0 += 256) {
      const int64_t m1 = std::min(n_pairs, m0 + 256);
      VI32 a[kVecs], o[kVecs];
      for (int64_t i = 0; i < kVecs; ++i) a[i] = o[i] = hn::Zero(kvq::DI32());
      for (int64_t m = m0; m < m1; ++m) {
        int32_t pair;
        std::memcpy(&pair, pb + 2 * m, sizeof(pair));
        const VI16 pv = hn::BitCast(DI16(), hn::Set(kvq::DI32(), pair));
        const int8_t* HWY_RESTRICT row = vb + m * 2 * kKvBlock;
        for (int64_t i = 0; i < kVecs; ++i) {
          a[i] = hn::ReorderWidenMulAccumulate(kvq::DI32(), kvq::LoadI8(row + i * kvq::kI16), pv,
                                               a[i], o[i]);
        }
      }
      for (int64_t i = 0; i < kVecs; ++i) {
        const auto run = hn::ConvertTo(dfv, hn::RearrangeToOddPlusEven(a[i], o[i]));
        hn::Store(hn::Add(hn::Load(dfv, f + i * kF32), run), dfv, f + i * kF32);
      }
    }
    const int64_t width = std::min(kKvBlock, head_dim - b * kKvBlock);
    for (int64_t i = 0; i < kVecs; ++i) {
      hn::Store(hn::Mul(hn::Load(dfv, f + i * kF32), out_scale), dfv, f + i * kF32);
    }
    std::memcpy(out + b * kKvBlock, f, static_cast<size_t>(width) * sizeof(float));
  }
#endif  // HWY_TARGET == HWY_SCALAR
}

// Row x [head_dim] as key or value j of a head's 8-bit cache (kernels.h StoreKeyQ8,
// StoreValueQ8): a value's quants go to every other byte, beside its pair's partner.
HWY_NOINLINE void StoreKvRowQ8Kernel(const float* x, int64_t head_dim, int64_t j, bool value,
                                     int8_t* q, uint16_t* d, int64_t capacity) {
  const int64_t nb = KvBlocks(head_dim);
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t width = std::min(kKvBlock, head_dim - b * kKvBlock);
    int8_t* HWY_RESTRICT row =
        value ? q + (b * capacity + j - j % 2) * kKvBlock + j % 2 : q + (j * nb + b) * kKvBlock;
    const int64_t stride = value ? 2 : 1;
#if HWY_TARGET == HWY_SCALAR
    d[b * capacity + j] = kernels_internal::QuantizeKvBlock(x + b * kKvBlock, width, row, stride);
#else
    HWY_ALIGN int16_t q16[kKvBlock];
    d[b * capacity + j] = kvq::QuantizeBlockQ8(x + b * kKvBlock, width, q16);
    for (int64_t i = 0; i < kKvBlock; ++i) row[i * stride] = static_cast<int8_t>(q16[i]);
#endif
  }
}

HWY_NOINLINE void AttentionHeadKernel(const float* q, const float* k, const float* v,
                                      int64_t kv_stride, int64_t n_keys, int64_t head_dim,
                                      float scale, float* scores, float* probs, float* out) {
  AttentionHeadImpl(q, k, v, kv_stride, n_keys, head_dim, scale, scores, probs, out);
}

HWY_NOINLINE void AttentionHeadF16Kernel(const float* q, const uint16_t* k, const uint16_t* v,
                                         int64_t kv_stride, int64_t n_keys, int64_t head_dim,
                                         float scale, float* scores, float* probs, float* out) {
  AttentionHeadImpl(q, k, v, kv_stride, n_keys, head_dim, scale, scores, probs, out);
}

}  // namespace HWY_NAMESPACE
}  // namespace gpt2
HWY_AFTER_NAMESPACE();

#endif  // GPT2_KERNELS_OPS_INL_H_
