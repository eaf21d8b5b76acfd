// Per-target float tiles of MatMul (matmul-inl.h): f32 activations against f32/f16 rows
// (FloatTile), against Q8_0/Q4_0 blocks at T == 1 (QuantTile), and quantized rows dequantized
// to f32 for prefill (DequantizeRow). Included once per Highway target, through matmul-inl.h.
#if defined(GPT2_KERNELS_MATMUL_FLOAT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GPT2_KERNELS_MATMUL_FLOAT_INL_H_
#undef GPT2_KERNELS_MATMUL_FLOAT_INL_H_
#else
#define GPT2_KERNELS_MATMUL_FLOAT_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>

#include "kernels/internal.h"
#include "kernels/matmul-decode-inl.h"
#include "kernels/relaxed_simd.h"

HWY_BEFORE_NAMESPACE();
namespace gpt2 {
namespace HWY_NAMESPACE {
namespace matmul {

// a * b + c for the float tiles: hn::MulAdd (an FMA on x86 from AVX2), and on WASM, which has no
// FMA in SIMD128, relaxed_simd.h's gpt2_wasm_madd (an FMA in the relaxed module, where the CPU
// has one: half the instructions of the float tiles' inner loop).
HWY_INLINE VF Fma(VF a, VF b, VF c) {
#if HWY_TARGET == HWY_WASM
  return VF{gpt2_wasm_madd(a.raw, b.raw, c.raw)};
#else
  return hn::MulAdd(a, b, c);
#endif
}

// ---- Tiles: out[r][t] = sum_c x[t, c] * W[row r, c] for kR rows and kT tokens ---------------

// Float weights (f32, f16): two vectors per step (kStepVecs = 1: one), one more if kLanes
// columns remain, then the last cols % kLanes in scalar code. With one token each row keeps two
// accumulators so the FMA chains are 2 kR long-lived chains.
template <size_t kR, size_t kT, typename WT, size_t kStepVecs = 2>
HWY_INLINE void FloatTile(const float* HWY_RESTRICT x, int64_t cols,
                          const WT* HWY_RESTRICT const* rows, float (&out)[kR][kT]) {
  static_assert(kStepVecs == 1 || kStepVecs == 2, "one or two vectors per step");
  const DF df;
  // Two accumulator sets per row shorten the add chains; with many rows in flight the rows
  // already give enough independent chains.
  constexpr size_t kSets = kT == 1 && kR <= 4 ? 2 : 1;
  VF acc[kSets][kR][kT];
  for (size_t s = 0; s < kSets; ++s) {
    for (size_t r = 0; r < kR; ++r) {
      for (size_t t = 0; t < kT; ++t) acc[s][r][t] = hn::Zero(df);
    }
  }
  int64_t c = 0;
  for (; kStepVecs == 2 && c + 2 * static_cast<int64_t>(kLanes) <= cols; c += 2 * kLanes) {
    VF xa[kT], xb[kT];
    for (size_t t = 0; t < kT; ++t) {
      xa[t] = hn::LoadU(df, x + static_cast<int64_t>(t) * cols + c);
      xb[t] = hn::LoadU(df, x + static_cast<int64_t>(t) * cols + c + kLanes);
    }
    for (size_t r = 0; r < kR; ++r) {
      VF wa, wb;
      LoadWeightPair(df, rows[r] + c, wa, wb);
      for (size_t t = 0; t < kT; ++t) {
        acc[0][r][t] = Fma(wa, xa[t], acc[0][r][t]);
        acc[kSets - 1][r][t] = Fma(wb, xb[t], acc[kSets - 1][r][t]);
      }
    }
  }
  // With two vectors per step this runs at most once.
  for (; c + static_cast<int64_t>(kLanes) <= cols; c += kLanes) {
    VF xv[kT];
    for (size_t t = 0; t < kT; ++t) xv[t] = hn::LoadU(df, x + static_cast<int64_t>(t) * cols + c);
    for (size_t r = 0; r < kR; ++r) {
      const VF wv = LoadWeights(df, rows[r] + c);
      for (size_t t = 0; t < kT; ++t) acc[0][r][t] = Fma(wv, xv[t], acc[0][r][t]);
    }
  }
  for (size_t r = 0; r < kR; ++r) {
    for (size_t t = 0; t < kT; ++t) {
      VF total = acc[0][r][t];
      if (kSets == 2) total = hn::Add(total, acc[kSets - 1][r][t]);
      float sum = hn::GetLane(hn::SumOfLanes(df, total));
      for (int64_t cc = c; cc < cols; ++cc) {
        sum += ScalarWeight(rows[r][cc]) * x[static_cast<int64_t>(t) * cols + cc];
      }
      out[r][t] = sum;
    }
  }
}

// Quantized weights with one token (decode with f32 activations), block by block: the block's
// dot product is accumulated unscaled (two partial sums) and multiplied by d once. The f16
// scales of 2 kLanes blocks per row are converted together (one vector conversion instead of a
// scalar one per block). Prefill with f32 activations dequantizes whole rows instead
// (DequantizedRowGroup).
template <size_t kR, typename Block>
HWY_INLINE void QuantTile(const float* HWY_RESTRICT x, int64_t cols,
                          const Block* HWY_RESTRICT const* rows, float (&out)[kR][1]) {
  const DF df;
  constexpr size_t kChunk = 2 * kLanes;
  VF acc[kR];
  for (size_t r = 0; r < kR; ++r) acc[r] = hn::Zero(df);
  const int64_t num_blocks = cols / 32;
  for (int64_t b0 = 0; b0 < num_blocks; b0 += kChunk) {
    const size_t chunk =
        static_cast<size_t>(HWY_MIN(static_cast<int64_t>(kChunk), num_blocks - b0));
    HWY_ALIGN float scales[kR][kChunk];
    for (size_t r = 0; r < kR; ++r) {
      HWY_ALIGN uint16_t bits[kChunk];
      if (chunk == kChunk) {  // fixed trip count: unrolled into plain loads
        for (size_t i = 0; i < kChunk; ++i) bits[i] = rows[r][b0 + i].d;
      } else {
        for (size_t i = 0; i < kChunk; ++i) bits[i] = i < chunk ? rows[r][b0 + i].d : 0;
      }
      VF lo, hi;
      HalvesToF32(df, bits, lo, hi);
      hn::Store(lo, df, scales[r]);
      hn::Store(hi, df, scales[r] + kLanes);
    }
    for (size_t i = 0; i < chunk; ++i) {
      const int64_t b = b0 + static_cast<int64_t>(i);
      const float* HWY_RESTRICT xb = x + b * 32;
      for (size_t r = 0; r < kR; ++r) {
        VF w[kBlockVecs];
        DecodeBlock(df, rows[r] + b, w);
        VF sum0 = hn::Mul(w[0], hn::LoadU(df, xb));
        VF sum1 = hn::Mul(w[1], hn::LoadU(df, xb + kLanes));
        for (size_t j = 2; j < kBlockVecs; j += 2) {
          sum0 = hn::MulAdd(w[j], hn::LoadU(df, xb + j * kLanes), sum0);
          sum1 = hn::MulAdd(w[j + 1], hn::LoadU(df, xb + (j + 1) * kLanes), sum1);
        }
        acc[r] = hn::MulAdd(hn::Add(sum0, sum1), hn::Set(df, scales[r][i]), acc[r]);
      }
    }
  }
  for (size_t r = 0; r < kR; ++r) out[r][0] = hn::GetLane(hn::SumOfLanes(df, acc[r]));
}

// One quantized row as f32: out[c] = d * q for each block (format/quant.h's dequantizers).
// Exact: q has at most 8 significant bits and d (an f16) 11, so the product fits f32's 24.
template <typename Block>
HWY_INLINE void DequantizeRow(const Block* HWY_RESTRICT row, int64_t cols,
                              float* HWY_RESTRICT out) {
  const DF df;
  for (int64_t b = 0; b < cols / 32; ++b) {
    VF w[kBlockVecs];
    DecodeBlock(df, row + b, w);
    const VF d = hn::Set(df, kernels_internal::HalfToFloat(row[b].d));
    for (size_t j = 0; j < kBlockVecs; ++j) {
      hn::StoreU(hn::Mul(w[j], d), df, out + b * 32 + j * kLanes);
    }
  }
}

}  // namespace matmul
}  // namespace HWY_NAMESPACE
}  // namespace gpt2
HWY_AFTER_NAMESPACE();
#endif  // GPT2_KERNELS_MATMUL_FLOAT_INL_H_
