// Per-target tiling of MatMul (matmul-inl.h): how a product's rows and tokens are cut into the
// tiles of matmul-float-inl.h and matmul-int8-inl.h on every target (RunTile, RunRowGroup), and
// the f32-activation prefill of quantized weights (DequantizedPrefill). The WASM and AVX-512
// VNNI paths (matmul-wasm-inl.h, matmul-vnni-inl.h) replace parts of it on their targets.
// Included once per Highway target, through matmul-inl.h.
#if defined(GPT2_KERNELS_MATMUL_TILING_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GPT2_KERNELS_MATMUL_TILING_INL_H_
#undef GPT2_KERNELS_MATMUL_TILING_INL_H_
#else
#define GPT2_KERNELS_MATMUL_TILING_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "format/quant.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"
#include "kernels/matmul-decode-inl.h"
#include "kernels/matmul-float-inl.h"
#include "kernels/matmul-int8-inl.h"

HWY_BEFORE_NAMESPACE();
namespace gpt2 {
namespace HWY_NAMESPACE {
namespace matmul {

// Rows in flight at T == 1 (independent FMA chains), WASM float decode included: more rows spill
// V8's 16 vector registers in Chromium. BENCHMARKS-history.md "kDecodeRows".
constexpr size_t kDecodeRows = 4;
// Rows x tokens accumulators plus the decoded block must fit the register file (16 vectors on
// SSE/AVX2 and V8, 32 on AVX-512). BENCHMARKS-history.md "kPrefillRows".
constexpr size_t kPrefillRows = HWY_MAX_BYTES == 64 ? 4 : 2;
// WASM float prefill with relaxed SIMD's FMA (the relaxed twin only), one vector per step: its
// 2 x 4 accumulators stay in V8's 16 registers. BENCHMARKS-history.md "kFmaPrefillRows".
constexpr size_t kFmaPrefillRows = 2;

// Decode reads every weight once, so it runs at the speed of memory. A tile of adjacent rows
// reads its kRows rows as short streams inside a page or two, which the hardware prefetcher
// follows poorly. So a decode tile takes rows a stride apart (tile k of [r0, r1): rows r0 + k +
// i * tiles), each of its streams walking a run of consecutive rows (BENCHMARKS-history.md
// "ForEachStridedTile": twice the decode speed). Calls tile(r, step) for rows r + i * step,
// i < kRows; returns where the last (r1 - r0) % kRows rows, left to the caller, begin. Which rows
// share a tile changes no bits (each row is summed on its own); the rows left over are the last
// of the range, as before.
//
// With row_bytes (the bytes of one row), the run is also kept from putting most streams at
// nearly the same offset in a 4 KiB page: a stride of tiles rows that is (nearly) a multiple of
// 4096 bytes (GPT-2 medium's every product, XL's within 128 bytes) sends every stream to the
// same cache sets, and int8 decode moved 10-13 GB/s of weights there against 14-17 for small
// and large (the same entry). Where more than half the streams begin within
// 512 bytes of one another's page offset, the run takes up to 7 rows fewer if that spreads them,
// leaving those rows to the caller as well; other shapes (all of GPT-2 small's) keep their tiles.
template <int64_t kRows, typename TileFn>
HWY_INLINE int64_t ForEachStridedTile(int64_t r0, int64_t r1, const TileFn& tile,
                                      int64_t row_bytes = 0) {
  int64_t tiles = (r1 - r0) / kRows;
  // The most streams whose page offsets lie within 512 bytes of one stream's, for runs of n.
  const auto crowd = [&](int64_t n) {
    int64_t most = 0;
    for (int64_t i = 0; i < kRows; ++i) {
      int64_t near = 0;
      for (int64_t j = 0; j < kRows; ++j) {
        const int64_t d = ((j - i) * n * row_bytes % 4096 + 4096) % 4096;
        near += std::min(d, 4096 - d) < 512 ? 1 : 0;
      }
      most = std::max(most, near);
    }
    return most;
  };
  int64_t fewest = row_bytes > 0 && kRows > 2 ? crowd(tiles) : 0;
  if (fewest > kRows / 2) {
    const int64_t full = tiles;
    for (int64_t n = full - 1; n >= full - 7 && n > 0; --n) {
      const int64_t c = crowd(n);
      if (c < fewest) tiles = n, fewest = c;
    }
  }
  for (int64_t k = 0; k < tiles; ++k) tile(r0 + k, tiles);
  return r0 + tiles * kRows;
}

constexpr size_t kTokenTile = 4;  // tokens sharing one decoded weight vector

// The block-quantized cases of RunTile: Q8_0 and Q4_0 differ only in their block type.
template <size_t kR, size_t kT, typename Block>
HWY_INLINE void BlockTile(const float* HWY_RESTRICT xt, const Int8Activations* qa, int64_t t0,
                          const WeightView& w, int64_t r0, int64_t row_step, float (&out)[kR][kT]) {
  const int64_t cols = w.cols;
  const Block* rows[kR];
  for (size_t r = 0; r < kR; ++r) {
    rows[r] =
        static_cast<const Block*>(w.data) + (r0 + static_cast<int64_t>(r) * row_step) * (cols / 32);
  }
  if (qa != nullptr) {
    Int8Tile<kR, kT>(*qa, t0, cols, rows, out);
  } else if constexpr (kT == 1) {
    QuantTile<kR>(xt, cols, rows, out);
  } else {
    HWY_ABORT("f32-activation prefill of quantized weights goes through DequantizedRowGroup");
  }
}

// Adds the bias to a tile's dot products and stores them in y [T, rows].
template <size_t kR, size_t kT>
HWY_INLINE void StoreTile(const float (&out)[kR][kT], const float* HWY_RESTRICT bias, int64_t rows,
                          int64_t t0, int64_t r0, int64_t row_step, float* HWY_RESTRICT y) {
  for (size_t r = 0; r < kR; ++r) {
    const int64_t row = r0 + static_cast<int64_t>(r) * row_step;
    const float b = bias != nullptr ? bias[row] : 0.0f;
    for (size_t t = 0; t < kT; ++t) {
      y[(t0 + static_cast<int64_t>(t)) * rows + row] = out[r][t] + b;
    }
  }
}

// Calls tile(std::integral_constant<size_t, kT>, t0) for tokens [0, T) in tiles of kTokenTile,
// then one tile of the remaining 1-3.
template <typename TileFn>
HWY_INLINE void ForEachTokenTile(int64_t T, const TileFn& tile) {
  int64_t t0 = 0;
  for (; t0 + static_cast<int64_t>(kTokenTile) <= T; t0 += kTokenTile) {
    tile(std::integral_constant<size_t, kTokenTile>(), t0);
  }
  switch (T - t0) {
    case 3:
      tile(std::integral_constant<size_t, 3>(), t0);
      break;
    case 2:
      tile(std::integral_constant<size_t, 2>(), t0);
      break;
    case 1:
      tile(std::integral_constant<size_t, 1>(), t0);
      break;
    default:
      break;
  }
}
static_assert(kTokenTile == 4, "ForEachTokenTile's tail switch assumes 4-token tiles");

// Rows r0 + i * row_step (i < kR) x tokens [t0, t0 + kT): picks the tile for the weight type
// and stores bias + dot into y.
// qa: the activations quantized for QuantActivations::kInt8, or nullptr for f32 activations.
template <size_t kR, size_t kT, size_t kStepVecs = 2>
HWY_NOINLINE void RunTile(const float* HWY_RESTRICT x, const Int8Activations* qa, int64_t t0,
                          const WeightView& w, const float* HWY_RESTRICT bias,
                          float* HWY_RESTRICT y, int64_t r0, int64_t row_step = 1) {
  const int64_t cols = w.cols;
  const float* HWY_RESTRICT xt = x + t0 * cols;
  float out[kR][kT] = {};  // every case below fills it; {} quiets -Wmaybe-uninitialized
  switch (w.type) {
    case TensorType::kF32: {
      const float* rows[kR];
      for (size_t r = 0; r < kR; ++r) {
        rows[r] =
            static_cast<const float*>(w.data) + (r0 + static_cast<int64_t>(r) * row_step) * cols;
      }
      FloatTile<kR, kT, float, kStepVecs>(xt, cols, rows, out);
      break;
    }
    case TensorType::kF16: {
      const hwy::float16_t* rows[kR];
      for (size_t r = 0; r < kR; ++r) {
        rows[r] = static_cast<const hwy::float16_t*>(w.data) +
                  (r0 + static_cast<int64_t>(r) * row_step) * cols;
      }
      FloatTile<kR, kT, hwy::float16_t, kStepVecs>(xt, cols, rows, out);
      break;
    }
    case TensorType::kQ8_0:
      BlockTile<kR, kT, BlockQ8_0>(xt, qa, t0, w, r0, row_step, out);
      break;
    case TensorType::kQ4_0:
      BlockTile<kR, kT, BlockQ4_0>(xt, qa, t0, w, r0, row_step, out);
      break;
  }
  StoreTile<kR, kT>(out, bias, w.rows, t0, r0, row_step, y);
}

// All tokens of one row group, kTokenTile at a time.
template <size_t kR, size_t kStepVecs = 2>
HWY_INLINE void RunRowGroup(const float* x, const Int8Activations* qa, int64_t T,
                            const WeightView& w, const float* bias, float* y, int64_t r0) {
  ForEachTokenTile(T, [&](auto kT, int64_t t0) {
    RunTile<kR, decltype(kT)::value, kStepVecs>(x, qa, t0, w, bias, y, r0);
  });
}

// Prefill (T > 1) of quantized weights with f32 activations, rows [r0, r0 + kR): the rows are
// dequantized once into f32 scratch and every token then runs the f32 weights' FloatTile on
// them. Decoding a block costs about as much as multiplying it into kTokenTile tokens, so
// decoding it once per row group instead of once per token tile leaves the f32 model's
// arithmetic on a quarter (Q8_0) or an eighth (Q4_0) of its memory traffic. w = d * q is exact
// in f32, so the result is the f32 weights d * q's, summed as FloatTile sums.
template <size_t kR, typename Block>
HWY_NOINLINE void DequantizedRowGroup(const float* HWY_RESTRICT x, int64_t T, const WeightView& w,
                                      const float* HWY_RESTRICT bias, float* HWY_RESTRICT y,
                                      int64_t r0) {
  const int64_t cols = w.cols;
  // Per thread (the model splits one product's rows over threads); grows only.
  // Aligned: with AVX-512 every FloatTile load of a row 16 floats off a cache line would
  // straddle two (BENCHMARKS-history.md "DequantizedRowGroup").
  static thread_local std::vector<float> scratch;
  float* base = kernels_internal::CacheLineAligned(scratch, kR * static_cast<size_t>(cols));
  const float* rows[kR];
  for (size_t r = 0; r < kR; ++r) {
    float* row = base + static_cast<int64_t>(r) * cols;
    DequantizeRow(static_cast<const Block*>(w.data) + (r0 + static_cast<int64_t>(r)) * (cols / 32),
                  cols, row);
    rows[r] = row;
  }
  ForEachTokenTile(T, [&](auto kT, int64_t t0) {
    float out[kR][decltype(kT)::value];
    FloatTile<kR, decltype(kT)::value>(x + t0 * cols, cols, rows, out);
    StoreTile<kR, decltype(kT)::value>(out, bias, w.rows, t0, r0, 1, y);
  });
}

// Rows [r, row_end) of a DequantizedRowGroup prefill: kPrefillRows at a time, then single rows.
template <typename Block>
HWY_INLINE void DequantizedPrefill(const float* x, int64_t T, const WeightView& w,
                                   const float* bias, float* y, int64_t r, int64_t row_end) {
  for (; r + static_cast<int64_t>(kPrefillRows) <= row_end; r += kPrefillRows) {
    DequantizedRowGroup<kPrefillRows, Block>(x, T, w, bias, y, r);
  }
  for (; r < row_end; ++r) DequantizedRowGroup<1, Block>(x, T, w, bias, y, r);
}

}  // namespace matmul
}  // namespace HWY_NAMESPACE
}  // namespace gpt2
HWY_AFTER_NAMESPACE();
#endif  // GPT2_KERNELS_MATMUL_TILING_INL_H_
