// Per-target int8-activation tiles of MatMul (matmul-inl.h, QuantActivations::kInt8): the
// activation quantizer (QuantizeBlock, QuantizeActivations) and the integer block dots
// (Int8Tile). Included once per Highway target, through matmul-inl.h; ops-inl.h's 8-bit
// attention quantizes its query with QuantizeBlock too.
#if defined(GPT2_KERNELS_MATMUL_INT8_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GPT2_KERNELS_MATMUL_INT8_INL_H_
#undef GPT2_KERNELS_MATMUL_INT8_INL_H_
#else
#define GPT2_KERNELS_MATMUL_INT8_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "format/f16.h"
#include "format/quant.h"
#include "kernels/internal.h"
#include "kernels/matmul-decode-inl.h"

HWY_BEFORE_NAMESPACE();
namespace gpt2 {
namespace HWY_NAMESPACE {
namespace matmul {

// ---- Int8 activations (QuantActivations::kInt8) ----------------------------------------------
//
// ggml's vec_dot_q8_0_q8_0 scheme: x is quantized once per product to Q8_0 blocks, then each
// weight block's dot with it is an integer multiply-add of int16 pairs (ReorderWidenMulAccumulate
// on i16: pmaddwd on x86, i32x4.dot_i16x8_s on WASM), exact in int32, converted to f32 once per
// block and scaled by dw * dx. Per row and block on WASM that is 4 widening loads and 4 dots
// instead of 12 widenings, 16 int->float steps and 8 multiply-adds of the f32 path.

using Int8Activations = kernels_internal::Int8Activations;

constexpr size_t kI32Lanes = hn::MaxLanes(DI32());

// One block of 32 activations xb to Q8_0 as format/quant.h QuantizeRowQ8_0 (ggml
// quantize_row_q8_0_ref) does it, bit for bit: amax = max |x|, d = amax / 127 in f32, its f32
// reciprocal id (0 if d is 0), qx = roundf(x * id) with halves away from zero. Vector code
// emulates roundf (Highway's Round is to even): r = trunc(v) + copysign(1, v) where
// |v - trunc(v)| >= 0.5, exact for every float as in quant.cc's RoundToInt8, whose NaN -> 0 and
// clamp to [-128, 127] (reached when id is inf, d a subnormal) it copies too. Blocks holding inf
// or NaN go to QuantizeRowQ8_0 itself: its max scan's result then depends on the order of the
// comparisons, which a vector max does not keep. Writes the block's quants widened to int16, its
// f16 scale's bits; returns sum_i qx[i].
HWY_INLINE int32_t QuantizeBlock(const float* HWY_RESTRICT xb, int16_t* HWY_RESTRICT q,
                                 uint16_t& d_bits) {
  const DF df;
  const DI32 di32;
  const hn::Rebind<int16_t, DF> di16;  // kLanes int16: one f32 vector's quants
  VF v[kBlockVecs];
  VF amax = hn::Zero(df);
  VF finite = hn::Zero(df);  // stays 0 unless some x - x is NaN (x inf or NaN)
  for (size_t j = 0; j < kBlockVecs; ++j) {
    v[j] = hn::LoadU(df, xb + j * kLanes);
    amax = hn::Max(amax, hn::Abs(v[j]));
    finite = hn::Add(finite, hn::Sub(v[j], v[j]));
  }
  if (!hn::AllTrue(df, hn::Eq(finite, hn::Zero(df)))) {
    BlockQ8_0 block;
    QuantizeRowQ8_0(xb, &block, 32);
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) {
      q[i] = block.qs[i];
      sum += block.qs[i];
    }
    d_bits = block.d;
    return sum;
  }
  const float d = hn::GetLane(hn::MaxOfLanes(df, amax)) / 127.0f;  // (1 << 7) - 1
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  d_bits = F32ToF16(d);
  const VF vid = hn::Set(df, id);
  const VF half = hn::Set(df, 0.5f);
  const VF one = hn::Set(df, 1.0f);
  auto sum = hn::Zero(di32);
  for (size_t j = 0; j < kBlockVecs; ++j) {
    const VF s = hn::Mul(v[j], vid);
    VF r = hn::Trunc(s);
    r = hn::IfThenElse(hn::Ge(hn::Abs(hn::Sub(s, r)), half), hn::Add(r, hn::CopySign(one, s)), r);
    r = hn::IfThenElseZero(hn::Eq(r, r), r);  // NaN (0 * inf) -> 0
    r = hn::Min(hn::Max(r, hn::Set(df, -128.0f)), hn::Set(df, 127.0f));
    const auto qi = hn::ConvertTo(di32, r);
    sum = hn::Add(sum, qi);
    hn::StoreU(hn::DemoteTo(di16, qi), di16, q + j * kLanes);
  }
  return hn::GetLane(hn::SumOfLanes(di32, sum));
}

// Sizes a for x: [T, cols] (with room for a.q4_offset when q4_offset is true). Vectors only
// grow, so a steady token loop does not allocate. With AVX-512 VNNI and T > 1 only the vnni_
// arrays are filled (VnniPrefill runs every row and token of such a product).
HWY_INLINE void SizeActivations(int64_t T, int64_t cols, bool q4_offset, Int8Activations& a) {
  const int64_t nb = cols / 32;
  constexpr int64_t kChunk = 2 * kLanes;
  a.d_stride = (nb + kChunk - 1) / kChunk * kChunk;
  a.T = T;
  a.vnni_T = 0;
  if (HWY_TARGET == HWY_AVX3_DL && T > 1) {
    a.vnni_T = (T + 3) / 4 * 4;
    const size_t entries = static_cast<size_t>(nb * a.vnni_T);
    if (a.vnni_start.size() < entries) {
      a.vnni_q.resize(entries * 32);
      a.vnni_start.resize(entries);
      a.vnni_dx.resize(entries);
    }
    // The pad tokens' entries, which QuantizeActivations never writes: zeros make their sums 0.
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t t = T; t < a.vnni_T; ++t) {
        const int64_t e = b * a.vnni_T + t;
        std::memset(a.vnni_q.data() + e * 32, 0, 32);
        a.vnni_start[e] = 0;
        a.vnni_dx[e] = 0.0f;
      }
    }
    return;
  }
  if (a.q.size() < static_cast<size_t>(T * cols)) a.q.resize(static_cast<size_t>(T * cols));
  if (a.d.size() < static_cast<size_t>(T * a.d_stride)) {
    a.d.resize(static_cast<size_t>(T * a.d_stride));
  }
  const size_t offsets = q4_offset ? static_cast<size_t>(T * nb) * kI32Lanes : 0;
  if (a.q4_offset.size() < offsets) a.q4_offset.resize(offsets);
  if (T > 1 && a.d_by_block.size() < static_cast<size_t>(nb * T)) {
    a.d_by_block.resize(static_cast<size_t>(nb * T));
  }
  if (HWY_TARGET == HWY_WASM && T > 1 && a.wasm_dot == 0) {
    kernels_internal::CacheLineAligned(a.q_by_block, static_cast<size_t>(T * cols));
  } else if (HWY_TARGET == HWY_WASM && T > 1 && a.wasm_dot == kernels_internal::kWasmDotPairs) {
    kernels_internal::CacheLineAligned(a.q16_by_pair, static_cast<size_t>(a.Q16Offset(nb, 0)));
  } else if (HWY_TARGET == HWY_WASM && T > 1) {
    kernels_internal::CacheLineAligned(a.q8_by_block, static_cast<size_t>(a.Q8Offset(nb, 0)));
    if (a.sum_by_block.size() < static_cast<size_t>(nb * T)) {
      a.sum_by_block.resize(static_cast<size_t>(nb * T));
    }
  }
}

// Quantizes tokens [t0, t1) of x: [T, cols] into a, sized by SizeActivations (filling
// a.q4_offset when q4_offset is true). Writes only those tokens' entries, so threads may
// quantize disjoint token ranges at once.
HWY_NOINLINE void QuantizeActivations(const float* HWY_RESTRICT x, int64_t t0, int64_t t1,
                                      int64_t cols, bool q4_offset, Int8Activations& a) {
  const int64_t nb = cols / 32;
  const int64_t T = a.T;
  if (HWY_TARGET == HWY_AVX3_DL && a.vnni_T > 0) {
    // VnniPrefill reads only its own arrays: quants narrowed to int8 in place of a.q.
    const DI16 di16;
    const hn::Rebind<int8_t, DI16> di8;
    int8_t* HWY_RESTRICT vnni_q = a.vnni_q.data();
    int32_t* HWY_RESTRICT vnni_start = a.vnni_start.data();
    float* HWY_RESTRICT vnni_dx = a.vnni_dx.data();
    const int32_t offset = q4_offset ? -8 : -128;
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t b = 0; b < nb; ++b) {
        HWY_ALIGN int16_t q[32];
        uint16_t d_bits;
        const int32_t sum = QuantizeBlock(x + t * cols + b * 32, q, d_bits);
        const int64_t e = b * a.vnni_T + t;
        for (size_t j = 0; j < kI16Vecs; ++j) {
          hn::StoreU(hn::DemoteTo(di8, hn::Load(di16, q + j * kI16Lanes)), di8,
                     vnni_q + e * 32 + j * kI16Lanes);
        }
        vnni_start[e] = offset * sum;
        vnni_dx[e] = kernels_internal::HalfToFloat(d_bits);
      }
    }
    return;
  }
  const bool by_block = HWY_TARGET == HWY_WASM && T > 1;
  int16_t* HWY_RESTRICT q_by_block = by_block && a.wasm_dot == 0
                                         ? kernels_internal::FirstOnCacheLine(a.q_by_block.data())
                                         : nullptr;
  const bool pairs = by_block && a.wasm_dot == kernels_internal::kWasmDotPairs;
  int16_t* HWY_RESTRICT q16_by_pair =
      pairs ? kernels_internal::FirstOnCacheLine(a.q16_by_pair.data()) : nullptr;
  int8_t* HWY_RESTRICT q8_by_block = by_block && a.wasm_dot != 0 && !pairs
                                         ? kernels_internal::FirstOnCacheLine(a.q8_by_block.data())
                                         : nullptr;
  const DI16 di16;
  const hn::Rebind<int8_t, DI16> di8;
  for (int64_t t = t0; t < t1; ++t) {
    int16_t* HWY_RESTRICT q = a.q.data() + t * cols;
    float* HWY_RESTRICT d = a.d.data() + t * a.d_stride;
    for (int64_t b = 0; b < nb; ++b) {
      uint16_t d_bits;
      const int32_t sum = QuantizeBlock(x + t * cols + b * 32, q + b * 32, d_bits);
      d[b] = kernels_internal::HalfToFloat(d_bits);
      if (T > 1) a.d_by_block[b * T + t] = d[b];
      if (q_by_block != nullptr) std::memcpy(q_by_block + (b * T + t) * 32, q + b * 32, 64);
      if (q16_by_pair != nullptr) {
        int16_t* HWY_RESTRICT pair = q16_by_pair + a.Q16Offset(b, t);
        for (int64_t c = 0; c < 16; ++c) std::memcpy(pair + c * 8, q + b * 32 + c * 2, 4);
      }
      if (q8_by_block != nullptr) {
        HWY_ALIGN int8_t q8[32];
        for (size_t j = 0; j < kI16Vecs; ++j) {
          hn::Store(hn::DemoteTo(di8, hn::LoadU(di16, q + b * 32 + j * kI16Lanes)), di8,
                    q8 + j * kI16Lanes);
        }
        int8_t* HWY_RESTRICT group = q8_by_block + a.Q8Offset(b, t);
        for (int64_t c = 0; c < 8; ++c) std::memcpy(group + c * 16, q8 + c * 4, 4);
        a.sum_by_block[b * T + t] = sum;
      }
      if (q4_offset) {
        int32_t* HWY_RESTRICT o = a.q4_offset.data() + (t * nb + b) * kI32Lanes;
        o[0] = -8 * sum;
        for (size_t i = 1; i < kI32Lanes; ++i) o[i] = 0;
      }
    }
    for (int64_t b = nb; b < a.d_stride; ++b) d[b] = 0.0f;
  }
}

// The int32 vector a block's dot starts from: zero for Q8_0, the activations' -8 sum_i qx for
// Q4_0 (Int8Activations::q4_offset); t and b are the token and block.
HWY_INLINE hn::Vec<DI32> BlockDotStart(const BlockQ8_0*, const Int8Activations&, int64_t, int64_t,
                                       int64_t) {
  return hn::Zero(DI32());
}
HWY_INLINE hn::Vec<DI32> BlockDotStart(const BlockQ4_0*, const Int8Activations& a, int64_t t,
                                       int64_t nb, int64_t b) {
  return hn::LoadU(DI32(), a.q4_offset.data() + (t * nb + b) * kI32Lanes);
}

// Exact start + sum_i w[i] * q[i] over one block, spread over the int32 lanes.
HWY_INLINE hn::Vec<DI32> BlockDot(const VI16 (&w)[kI16Vecs], const VI16 (&q)[kI16Vecs],
                                  hn::Vec<DI32> start) {
  const DI32 di32;
  auto sum0 = start;
  auto sum1 = hn::Zero(di32);  // used by targets whose multiply-add splits even/odd pairs
  for (size_t j = 0; j < kI16Vecs; ++j) {
    sum0 = hn::ReorderWidenMulAccumulate(di32, w[j], q[j], sum0, sum1);
  }
  return hn::RearrangeToOddPlusEven(sum0, sum1);
}

#if HWY_TARGET != HWY_SCALAR  // one lane there: nothing to pack
// 128-bit targets: the lane sums of v[0..3] as one vector, lane t = sum of v[t]'s lanes (two
// rounds of interleave-and-add: 6 shuffles and 3 adds for 4 sums).
HWY_INLINE hn::Vec<DI32> SumEachOf4(const hn::Vec<DI32> (&v)[4]) {
  const DI32 di32;
  const hn::Repartition<int64_t, DI32> di64;
  // [v0_0 + v0_2, v1_0 + v1_2, v0_1 + v0_3, v1_1 + v1_3] and the same for v2, v3.
  const auto s01 =
      hn::Add(hn::InterleaveLower(di32, v[0], v[1]), hn::InterleaveUpper(di32, v[0], v[1]));
  const auto s23 =
      hn::Add(hn::InterleaveLower(di32, v[2], v[3]), hn::InterleaveUpper(di32, v[2], v[3]));
  const auto lo = hn::InterleaveLower(di64, hn::BitCast(di64, s01), hn::BitCast(di64, s23));
  const auto hi = hn::InterleaveUpper(di64, hn::BitCast(di64, s01), hn::BitCast(di64, s23));
  return hn::Add(hn::BitCast(di32, lo), hn::BitCast(di32, hi));
}
#endif

// out[r][t] = sum_b (dw[r, b] dx[t0 + t, b]) * dot(qw[r, b], qx[t0 + t, b]).
template <size_t kR, size_t kT, typename Block>
HWY_INLINE void Int8Tile(const Int8Activations& a, int64_t t0, int64_t cols,
                         const Block* HWY_RESTRICT const* rows, float (&out)[kR][kT]) {
  const DF df;
  const DI16 di16;
  constexpr size_t kChunk = 2 * kLanes;
  // 4-lane targets (WASM, SSE4, ...), 4 tokens: the 4 tokens' block dots of one row are summed
  // into the lanes of one vector (SumEachOf4), so the int->float convert, the dw * dx scale and
  // the accumulate are one vector operation each per row and block instead of one per token;
  // acc[r][0] then holds token t in lane t.
  constexpr bool kPackTokens = HWY_TARGET != HWY_SCALAR && kT == 4 && kLanes == 4 && kI32Lanes == 4;
  VF acc[kR][kT];
  for (size_t r = 0; r < kR; ++r) {
    for (size_t t = 0; t < kT; ++t) acc[r][t] = hn::Zero(df);
  }
  const int16_t* HWY_RESTRICT qx = a.q.data() + t0 * cols;
  const float* HWY_RESTRICT dx = a.d.data() + t0 * a.d_stride;
  const int64_t num_blocks = cols / 32;
  for (int64_t b0 = 0; b0 < num_blocks; b0 += kChunk) {
    const size_t chunk =
        static_cast<size_t>(HWY_MIN(static_cast<int64_t>(kChunk), num_blocks - b0));
    // dw of the chunk's blocks per row; with one token already multiplied by dx (the f32
    // product ggml forms), 2 vector multiplies instead of one scalar multiply per block.
    HWY_ALIGN float scales[kR][kChunk];
    for (size_t r = 0; r < kR; ++r) {
      HWY_ALIGN uint16_t bits[kChunk];
      if (chunk == kChunk) {
        for (size_t i = 0; i < kChunk; ++i) bits[i] = rows[r][b0 + i].d;
      } else {
        for (size_t i = 0; i < kChunk; ++i) bits[i] = i < chunk ? rows[r][b0 + i].d : 0;
      }
      VF lo, hi;
      HalvesToF32(df, bits, lo, hi);
      if constexpr (kT == 1) {
        lo = hn::Mul(lo, hn::LoadU(df, dx + b0));  // d is padded to whole chunks
        hi = hn::Mul(hi, hn::LoadU(df, dx + b0 + kLanes));
      }
      hn::Store(lo, df, scales[r]);
      hn::Store(hi, df, scales[r] + kLanes);
    }
    for (size_t i = 0; i < chunk; ++i) {
      const int64_t b = b0 + static_cast<int64_t>(i);
      if constexpr (kT == 1) {
        VI16 q[kI16Vecs];
        for (size_t j = 0; j < kI16Vecs; ++j) q[j] = hn::LoadU(di16, qx + b * 32 + j * kI16Lanes);
        const auto start = BlockDotStart(rows[0], a, t0, num_blocks, b);
        for (size_t r = 0; r < kR; ++r) {
          VI16 w[kI16Vecs];
          BlockToI16(rows[r] + b, w);
          const VF dot = hn::ConvertTo(df, BlockDot(w, q, start));
          acc[r][0] = hn::MulAdd(dot, hn::Set(df, scales[r][i]), acc[r][0]);
        }
#if HWY_TARGET != HWY_SCALAR
      } else if constexpr (kPackTokens) {
        const VF dx4 = hn::LoadU(df, a.d_by_block.data() + b * a.T + t0);
        for (size_t r = 0; r < kR; ++r) {
          VI16 w[kI16Vecs];
          BlockToI16(rows[r] + b, w);
          hn::Vec<DI32> dots[4];
          for (size_t t = 0; t < 4; ++t) {
            const int16_t* HWY_RESTRICT qt = qx + static_cast<int64_t>(t) * cols + b * 32;
            VI16 q[kI16Vecs];
            for (size_t j = 0; j < kI16Vecs; ++j) q[j] = hn::LoadU(di16, qt + j * kI16Lanes);
            dots[t] = BlockDot(
                w, q, BlockDotStart(rows[0], a, t0 + static_cast<int64_t>(t), num_blocks, b));
          }
          const VF scale = hn::Mul(dx4, hn::Set(df, scales[r][i]));
          acc[r][0] = hn::MulAdd(hn::ConvertTo(df, SumEachOf4(dots)), scale, acc[r][0]);
        }
#endif
      } else {
        // Widen one row's block once and use it for all tokens; the tokens' qx come from L1.
        for (size_t r = 0; r < kR; ++r) {
          VI16 w[kI16Vecs];
          BlockToI16(rows[r] + b, w);
          for (size_t t = 0; t < kT; ++t) {
            const int16_t* HWY_RESTRICT qt = qx + static_cast<int64_t>(t) * cols + b * 32;
            VI16 q[kI16Vecs];
            for (size_t j = 0; j < kI16Vecs; ++j) q[j] = hn::LoadU(di16, qt + j * kI16Lanes);
            const auto start =
                BlockDotStart(rows[0], a, t0 + static_cast<int64_t>(t), num_blocks, b);
            const VF dot = hn::ConvertTo(df, BlockDot(w, q, start));
            const float scale = scales[r][i] * dx[static_cast<int64_t>(t) * a.d_stride + b];
            acc[r][t] = hn::MulAdd(dot, hn::Set(df, scale), acc[r][t]);
          }
        }
      }
    }
  }
  if constexpr (kPackTokens) {
    for (size_t r = 0; r < kR; ++r) {
      HWY_ALIGN float lanes[kLanes];
      hn::Store(acc[r][0], df, lanes);
      for (size_t t = 0; t < kT; ++t) out[r][t] = lanes[t];
    }
    return;
  }
  for (size_t r = 0; r < kR; ++r) {
    for (size_t t = 0; t < kT; ++t) out[r][t] = hn::GetLane(hn::SumOfLanes(df, acc[r][t]));
  }
}

}  // namespace matmul
}  // namespace HWY_NAMESPACE
}  // namespace gpt2
HWY_AFTER_NAMESPACE();
#endif  // GPT2_KERNELS_MATMUL_INT8_INL_H_
