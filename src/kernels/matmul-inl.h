// Per-target MatMul: y[t, r] = bias[r] + sum_c x[t, c] W[r, c] for f32/f16/Q8_0/Q4_0 weights
// (kernels.h). Included once per Highway target by kernels.cc (the skeleton.cc recipe).
//
// Shape of the work. Decode (T == 1) is memory-bandwidth bound: every weight byte is read once
// per token, so the loop streams kDecodeRows rows at a time, decodes each weight block in
// registers (int8 -> int32 -> f32, PromoteTo + ConvertTo) and multiplies it straight into the
// f32 activations; the block's partial sum is scaled by the block's d once (ggml's
// vec_dot_q8_0 does the same per-block scaling, but with quantized activations; we keep x in
// f32 so the result matches the scalar twin to float rounding). Prefill (T > 1) works on tiles
// of kPrefillRows rows x up to kTokenTile tokens: each weight vector is decoded and scaled once
// and used for every token of the tile, so the decode cost is shared by 4 tokens. The tile loop
// is row-outer so each weight row is read from memory once per call; the tile's activations
// (kTokenTile x cols floats) stay in cache.
#if defined(GPT2_KERNELS_MATMUL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GPT2_KERNELS_MATMUL_INL_H_
#undef GPT2_KERNELS_MATMUL_INL_H_
#else
#define GPT2_KERNELS_MATMUL_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <hwy/highway.h>

#include "format/quant.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace gpt2 {
namespace HWY_NAMESPACE {
namespace matmul {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr size_t kDecodeRows = 4;   // rows in flight at T == 1 (independent FMA chains)
constexpr size_t kPrefillRows = 2;  // rows x tokens accumulators must fit 16 registers
constexpr size_t kTokenTile = 4;    // tokens sharing one decoded weight vector

// Lanes of f32 per vector; a Q block of 32 weights is kBlockVecs vectors. Every target we build
// (x86 up to AVX-512, WASM, EMU128, scalar) has at most 16 f32 lanes.
constexpr size_t kLanes = hn::MaxLanes(DF());
static_assert(kLanes <= 32 && 32 % kLanes == 0, "a Q block must be whole vectors");
constexpr size_t kBlockVecs = 32 / kLanes;

// ---- Weight decoders: vector j (lanes [j*kLanes, (j+1)*kLanes)) of a row or block, as f32 ----

HWY_INLINE VF LoadWeights(DF df, const float* HWY_RESTRICT p) { return hn::LoadU(df, p); }

HWY_INLINE VF LoadWeights(DF df, const hwy::float16_t* HWY_RESTRICT p) {
  // F16C (vcvtph2ps) on AVX2/AVX3, integer bit manipulation elsewhere (Highway's PromoteTo).
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p));
}

// Q8_0: 32 int8 quants, w = d * q (format/quant.h).
HWY_INLINE VF DecodeQ8_0(DF df, const BlockQ8_0* HWY_RESTRICT block, size_t j) {
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<int8_t, DF> di8;
  return hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(di8, block->qs + j * kLanes)));
}

// Q4_0: weight i < 16 is the low nibble of qs[i], weight i >= 16 the high nibble of qs[i - 16];
// w = d * (nibble - 8) (format/quant.h, ggml dequantize_row_q4_0).
HWY_INLINE VF DecodeQ4_0(DF df, const BlockQ4_0* HWY_RESTRICT block, size_t j) {
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<uint8_t, DF> du8;
  const size_t first = j * kLanes;
  const bool high = first >= 16;
  const auto bytes =
      hn::BitCast(di32, hn::PromoteTo(hn::RebindToUnsigned<DF>(),
                                      hn::LoadU(du8, block->qs + (high ? first - 16 : first))));
  const auto nibbles = high ? hn::ShiftRight<4>(bytes) : hn::And(bytes, hn::Set(di32, 0x0f));
  return hn::ConvertTo(df, hn::Sub(nibbles, hn::Set(di32, 8)));
}

HWY_INLINE VF DecodeBlock(DF df, const BlockQ8_0* HWY_RESTRICT block, size_t j) {
  return DecodeQ8_0(df, block, j);
}
HWY_INLINE VF DecodeBlock(DF df, const BlockQ4_0* HWY_RESTRICT block, size_t j) {
  return DecodeQ4_0(df, block, j);
}

HWY_INLINE float ScalarWeight(float w) { return w; }
HWY_INLINE float ScalarWeight(hwy::float16_t w) {
  uint16_t bits;
  std::memcpy(&bits, &w, sizeof(bits));
  return kernels_internal::HalfToFloat(bits);
}

// ---- Tiles: out[r][t] = sum_c x[t, c] * W[row r, c] for kR rows and kT tokens ---------------

// Float weights (f32, f16): a vector loop, then the cols % kLanes leftovers in scalar code.
template <size_t kR, size_t kT, typename WT>
HWY_INLINE void FloatTile(const float* HWY_RESTRICT x, int64_t cols,
                          const WT* HWY_RESTRICT const* rows, float (&out)[kR][kT]) {
  const DF df;
  VF acc[kR][kT];
  for (size_t r = 0; r < kR; ++r) {
    for (size_t t = 0; t < kT; ++t) acc[r][t] = hn::Zero(df);
  }
  int64_t c = 0;
  for (; c + static_cast<int64_t>(kLanes) <= cols; c += kLanes) {
    VF xv[kT];
    for (size_t t = 0; t < kT; ++t) xv[t] = hn::LoadU(df, x + static_cast<int64_t>(t) * cols + c);
    for (size_t r = 0; r < kR; ++r) {
      const VF wv = LoadWeights(df, rows[r] + c);
      for (size_t t = 0; t < kT; ++t) acc[r][t] = hn::MulAdd(wv, xv[t], acc[r][t]);
    }
  }
  for (size_t r = 0; r < kR; ++r) {
    for (size_t t = 0; t < kT; ++t) {
      float sum = hn::GetLane(hn::SumOfLanes(df, acc[r][t]));
      for (int64_t cc = c; cc < cols; ++cc) sum += ScalarWeight(rows[r][cc]) * x[static_cast<int64_t>(t) * cols + cc];
      out[r][t] = sum;
    }
  }
}

// Quantized weights: block by block. With one token the block's dot product is accumulated
// unscaled and multiplied by d once; with several tokens each weight vector is scaled once and
// reused by all kT tokens.
template <size_t kR, size_t kT, typename Block>
HWY_INLINE void QuantTile(const float* HWY_RESTRICT x, int64_t cols,
                          const Block* HWY_RESTRICT const* rows, float (&out)[kR][kT]) {
  const DF df;
  VF acc[kR][kT];
  for (size_t r = 0; r < kR; ++r) {
    for (size_t t = 0; t < kT; ++t) acc[r][t] = hn::Zero(df);
  }
  const int64_t num_blocks = cols / 32;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const float* HWY_RESTRICT xb = x + b * 32;
    if constexpr (kT == 1) {
      VF block_sum[kR];
      for (size_t r = 0; r < kR; ++r) block_sum[r] = hn::Zero(df);
      for (size_t j = 0; j < kBlockVecs; ++j) {
        const VF xv = hn::LoadU(df, xb + j * kLanes);
        for (size_t r = 0; r < kR; ++r) {
          block_sum[r] = hn::MulAdd(DecodeBlock(df, rows[r] + b, j), xv, block_sum[r]);
        }
      }
      for (size_t r = 0; r < kR; ++r) {
        const VF d = hn::Set(df, kernels_internal::HalfToFloat(rows[r][b].d));
        acc[r][0] = hn::MulAdd(block_sum[r], d, acc[r][0]);
      }
    } else {
      VF d[kR];
      for (size_t r = 0; r < kR; ++r) {
        d[r] = hn::Set(df, kernels_internal::HalfToFloat(rows[r][b].d));
      }
      for (size_t j = 0; j < kBlockVecs; ++j) {
        VF xv[kT];
        for (size_t t = 0; t < kT; ++t) xv[t] = hn::LoadU(df, xb + static_cast<int64_t>(t) * cols + j * kLanes);
        for (size_t r = 0; r < kR; ++r) {
          const VF wv = hn::Mul(DecodeBlock(df, rows[r] + b, j), d[r]);
          for (size_t t = 0; t < kT; ++t) acc[r][t] = hn::MulAdd(wv, xv[t], acc[r][t]);
        }
      }
    }
  }
  for (size_t r = 0; r < kR; ++r) {
    for (size_t t = 0; t < kT; ++t) out[r][t] = hn::GetLane(hn::SumOfLanes(df, acc[r][t]));
  }
}

// Rows [r0, r0 + kR) x tokens [t0, t0 + kT): picks the tile for the weight type and stores
// bias + dot into y.
template <size_t kR, size_t kT>
HWY_NOINLINE void RunTile(const float* HWY_RESTRICT x, int64_t t0, const WeightView& w,
                          const float* HWY_RESTRICT bias, float* HWY_RESTRICT y, int64_t r0) {
  const int64_t cols = w.cols;
  const float* HWY_RESTRICT xt = x + t0 * cols;
  float out[kR][kT] = {};  // every case below fills it; {} quiets -Wmaybe-uninitialized
  switch (w.type) {
    case TensorType::kF32: {
      const float* rows[kR];
      for (size_t r = 0; r < kR; ++r) rows[r] = static_cast<const float*>(w.data) + (r0 + static_cast<int64_t>(r)) * cols;
      FloatTile<kR, kT>(xt, cols, rows, out);
      break;
    }
    case TensorType::kF16: {
      const hwy::float16_t* rows[kR];
      for (size_t r = 0; r < kR; ++r) {
        rows[r] = static_cast<const hwy::float16_t*>(w.data) + (r0 + static_cast<int64_t>(r)) * cols;
      }
      FloatTile<kR, kT>(xt, cols, rows, out);
      break;
    }
    case TensorType::kQ8_0: {
      const BlockQ8_0* rows[kR];
      for (size_t r = 0; r < kR; ++r) {
        rows[r] = static_cast<const BlockQ8_0*>(w.data) + (r0 + static_cast<int64_t>(r)) * (cols / 32);
      }
      QuantTile<kR, kT>(xt, cols, rows, out);
      break;
    }
    case TensorType::kQ4_0: {
      const BlockQ4_0* rows[kR];
      for (size_t r = 0; r < kR; ++r) {
        rows[r] = static_cast<const BlockQ4_0*>(w.data) + (r0 + static_cast<int64_t>(r)) * (cols / 32);
      }
      QuantTile<kR, kT>(xt, cols, rows, out);
      break;
    }
  }
  for (size_t r = 0; r < kR; ++r) {
    const int64_t row = r0 + static_cast<int64_t>(r);
    const float b = bias != nullptr ? bias[row] : 0.0f;
    for (size_t t = 0; t < kT; ++t) {
      y[(t0 + static_cast<int64_t>(t)) * w.rows + row] = out[r][t] + b;
    }
  }
}

// All tokens of one row group, kTokenTile at a time.
template <size_t kR>
HWY_INLINE void RunRowGroup(const float* x, int64_t T, const WeightView& w, const float* bias,
                            float* y, int64_t r0) {
  int64_t t0 = 0;
  for (; t0 + static_cast<int64_t>(kTokenTile) <= T; t0 += kTokenTile) {
    RunTile<kR, kTokenTile>(x, t0, w, bias, y, r0);
  }
  switch (T - t0) {
    case 3: RunTile<kR, 3>(x, t0, w, bias, y, r0); break;
    case 2: RunTile<kR, 2>(x, t0, w, bias, y, r0); break;
    case 1: RunTile<kR, 1>(x, t0, w, bias, y, r0); break;
    default: break;
  }
}
static_assert(kTokenTile == 4, "RunRowGroup's tail switch assumes 4-token tiles");

}  // namespace matmul

// Arguments were checked by the caller (kernels.cc).
HWY_NOINLINE void MatMulKernel(const float* x, int64_t T, const WeightView& w, const float* bias,
                               float* y, int64_t row_begin, int64_t row_end) {
  int64_t r = row_begin;
  if (T == 1) {
    for (; r + static_cast<int64_t>(matmul::kDecodeRows) <= row_end; r += matmul::kDecodeRows) {
      matmul::RunTile<matmul::kDecodeRows, 1>(x, 0, w, bias, y, r);
    }
  } else {
    for (; r + static_cast<int64_t>(matmul::kPrefillRows) <= row_end;
         r += matmul::kPrefillRows) {
      matmul::RunRowGroup<matmul::kPrefillRows>(x, T, w, bias, y, r);
    }
  }
  for (; r < row_end; ++r) matmul::RunRowGroup<1>(x, T, w, bias, y, r);
}

}  // namespace HWY_NAMESPACE
}  // namespace gpt2
HWY_AFTER_NAMESPACE();

#endif  // GPT2_KERNELS_MATMUL_INL_H_
