// Per-target MatMul: y[t, r] = bias[r] + sum_c x[t, c] W[r, c] for f32/f16/Q8_0/Q4_0 weights
// (kernels.h). Included once per Highway target by kernels.cc (the skeleton.cc recipe).
//
// Shape of the work. Decode (T == 1) reads every weight byte once per token, so the loop streams
// kDecodeRows rows at a time (WASM int8: Int8DecodeGroups, 8 rows), rows a stride apart
// (ForEachStridedTile) so that each stream is long and sequential. Q8_0/Q4_0 weights by
// default meet int8 activations (QuantActivations::kInt8, ggml's q8_0 x q8_0 dot): x is
// quantized once per product (kernels.h MatMulInput), each weight block is widened to int16 in
// registers and multiplied-added in integers, and the block's int32 sum is scaled by dw * dx
// once. With f32 activations (kFloat) each block is decoded to f32 (int8 -> int32 -> f32) and
// multiplied straight into x, its partial sum scaled by d once. Prefill (T > 1) works on tiles of
// kPrefillRows rows x up to kTokenTile tokens: each weight block is decoded once and used for
// every token of the tile (int8), or each row group is dequantized once to f32 and then runs the
// f32 weights' tiles for all tokens (f32 activations, DequantizedRowGroup). The tile loop is
// row-outer, so each weight row is read from memory once per call while the activations stay in
// cache. WASM with int8 activations runs 2 rows over 8 tokens at a time instead
// (Int8PrefillRows), shaped by V8's code generation; AVX-512 with VNNI (AVX3_DL) runs 16
// repacked rows over 16 tokens with vpdpbusd (VnniPrefill).
//
// Informal throughput, CPU time on the 2-core AMD EPYC dev VM, one thread (gpt2_tests "[bench]"):
// Q8_0 3072 x 768 (2.4 MB, cache resident) at T = 1:
//   AVX3 f32 activations ~17 GB/s of weights, int8 ~23;  WASM under Node 20 f32 ~4.7, int8 ~8.6
//   (Int8DecodeGroups, Intel Xeon VM at load 6-8, 2026-12-01: int8 ~15, was ~9).
// At T = 64: AVX3 f32 activations ~100 GFLOP/s (dequantized rows, as fast as F32 weights), int8
// ~47 (x86 FMA on f32 is cheap; int8 adds a convert and a broadcast per block and token);
// WASM f32 ~13, int8 ~25 (no FMA: int8 saves more). AVX3_DL int8 (VNNI, AMD Zen 5): ~450.
#if defined(GPT2_KERNELS_MATMUL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GPT2_KERNELS_MATMUL_INL_H_
#undef GPT2_KERNELS_MATMUL_INL_H_
#else
#define GPT2_KERNELS_MATMUL_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <type_traits>
#include <vector>

#include <hwy/highway.h>

#include "format/f16.h"
#include "format/quant.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"
#include "kernels/relaxed_simd.h"

HWY_BEFORE_NAMESPACE();
namespace gpt2 {
namespace HWY_NAMESPACE {
namespace matmul {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr size_t kDecodeRows = 4;   // rows in flight at T == 1 (independent FMA chains)
// Int8-activation decode on WASM (Int8DecodeGroups) reads kInt8DecodeGroups groups of 4 rows at
// once: each block step then touches that many rows' cache lines, so more memory requests are in
// flight (a wasm loop reading 1 stream gets ~3.4 GB/s here, 4-16 streams ~12), while the
// group's values still mostly fit V8's 16 vector registers. Whole GPT-2 small Q8_0 decode under
// Node, tokens per CPU second, A/B alternating at load 6-8 (2026-12-01): 1 group ~39.5, 2 ~45.5,
// 3 ~47.5, 4 ~37 (V8 spills: it places every load of the block step before the arithmetic).
// The 64-row tiles of Int8Tile it replaced: ~37.5 at the same load (~62 on a quiet machine).
// In Chromium fewer groups win: GPT-2 small decode, Chromium 156, AMD EPYC Zen 4 guest, A/B in
// one page, median tok/s (2026-12-03): Q8_0 3 groups 93.3-98.9, 2 groups 114.7-115.4, 1 group
// 110.8-119.0; Q4_0 2 groups 106.9, 1 group 104.0; so 2, which Node also prefers to 1.
constexpr int64_t kInt8DecodeGroups = 2;
// Float-weight decode (f32, f16) runs kDecodeRows rows on WASM too. Streaming 16 rows at once
// (more memory requests in flight, as Int8DecodeGroups does) measured well under Node, but in
// Chromium the spilled accumulators made the loop slower than memory: GPT-2 small F32 decode,
// Chromium 156, AMD EPYC Zen 4 guest, one thread, A/B in one page, median tok/s (2026-12-03):
// relaxed module 16 rows 27.8-29.0, 12 rows 34.4, 8 rows 34.8-37.0, 4 rows 36.8-39.8; plain
// module 16 rows 30.4, 8 rows 35.0-36.8, 4 rows 44.0 (16 rows x 1 vector per step 20.6, x 4
// 25.4). BENCHMARKS.md "Decode tiles shaped in Chromium".
// Rows x tokens accumulators plus the decoded block must fit the register file: 16 vector
// registers on SSE/AVX2 (and V8's wasm SIMD), 32 on AVX-512. 4 rows measured ~1.8x faster
// prefill on AVX3 and slower on AVX2. (WASM with int8 activations: Int8PrefillRows.)
constexpr size_t kPrefillRows = HWY_MAX_BYTES == 64 ? 4 : 2;
// WASM float prefill with relaxed SIMD's FMA (the relaxed twin only): one vector per step, so the
// 2 x 4 accumulators, 4 activation vectors and a weight vector stay in V8's 16 registers; each
// spill costs a load and a store per FMA. GPT-2 small F32 prefill of 128 tokens, Chromium 156,
// AMD EPYC Zen 5 guest, tok/s (2026-12-02): plain module 139-161; with FMA 2 rows x 1 vector
// 219-236, 2 x 2 vectors 116-139, 3 x 1 126-131.
constexpr size_t kFmaPrefillRows = 2;

// Decode reads every weight once, so it runs at the speed of memory. A tile of adjacent rows
// reads its kRows rows as short streams inside a page or two, which the hardware prefetcher
// follows poorly: WASM Q8_0 decode of GPT-2 small's shape under Node moved 7-9 GB/s of weights
// that way. So a decode tile takes rows a stride apart (tile k of [r0, r1): rows r0 + k + i *
// tiles), each of its streams walking a run of consecutive rows: 16 GB/s, twice the tokens per
// second. Calls tile(r, step) for rows r + i * step, i < kRows; returns where the last
// (r1 - r0) % kRows rows, left to the caller, begin. Which rows share a tile changes no bits
// (each row is summed on its own); the rows left over are the last of the range, as before.
template <int64_t kRows, typename TileFn>
HWY_INLINE int64_t ForEachStridedTile(int64_t r0, int64_t r1, const TileFn& tile) {
  const int64_t tiles = (r1 - r0) / kRows;
  for (int64_t k = 0; k < tiles; ++k) tile(r0 + k, tiles);
  return r0 + tiles * kRows;
}

constexpr size_t kTokenTile = 4;    // tokens sharing one decoded weight vector
// WASM int8 prefill (Int8PrefillRows): kPrefillRowsWasm rows x kPrefillGroups groups of 4 tokens
// per pass. MatMul T = 64 under Node, GFLOP/s for qkv / fc / proj, quiet machine (2026-12-01):
// 1 row x 3 groups (before) 48.6 / 48.8 / 46.6; 2 x 2: 55.0 / 55.2 / 54.4; 2 x 1 46, 2 x 3 48,
// 3 x 1 47.5, 3 x 2 48, 4 x 1 50, 1 x 2 44 (more live vectors than V8's 16 registers: spills).
constexpr size_t kPrefillGroups = 2;
constexpr size_t kPrefillRowsWasm = 2;

// kFastest's choice (kernels.h FastestQuantActivations). With dequantized rows
// (DequantizedRowGroup) AVX-512 runs f32 prefill twice as fast as int8: gpt2_tests "[bench]",
// T = 64, one thread, CPU time, load ~5 (2026-12-01), GFLOP/s f32 / int8 for qkv 2304x768,
// fc 3072x768, proj 768x3072: AVX3 Q8_0 84 / 45, 100 / 47, 77 / 42 (F32 weights 80, 90, 77),
// Q4_0 88 / 38, 100 / 37, 92 / 36. AVX2 is a draw for Q8_0 (44 / 46, 56 / 51, 41 / 43) and
// SSE4 too (37 / 41, 37 / 40, 39 / 35), so they keep int8, the page's and llama.cpp's
// numbers. WASM has no FMA, so int8 wins there; decode (T == 1) is faster in int8 everywhere.
// AVX3_DL (AVX-512 with VNNI) runs int8 prefill with vpdpbusd (VnniPrefill), 3.5-5x its f32
// prefill: T = 64, AMD EPYC Zen 5, one thread, load 1-5 (2026-12-02), GFLOP/s int8 / f32 for
// qkv, fc, proj: Q8_0 478 / 122, 472 / 110, 440 / 83; Q4_0 467 / 137, 466 / 135, 417 / 99. Whole
// prompts of 2 to 128 tokens are faster in int8 there too (BENCHMARKS.md).
constexpr bool kFloatPrefillFaster = HWY_TARGET == HWY_AVX3;

// Lanes of f32 per vector; a Q block of 32 weights is kBlockVecs vectors. Every target we build
// (x86 up to AVX-512, WASM, EMU128, scalar) has at most 16 f32 lanes.
constexpr size_t kLanes = hn::MaxLanes(DF());
static_assert(kLanes <= 32 && 32 % kLanes == 0, "a Q block must be whole vectors");
constexpr size_t kBlockVecs = 32 / kLanes;
static_assert(kBlockVecs % 2 == 0, "the T == 1 block loop keeps two partial sums");

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

// WASM gets block decoders that only do full 16-byte loads: Highway 1.0.3 implements partial
// loads (4 int8, 4 f16) there with a memcpy into a vector, which goes through the wasm stack and
// costs more than the whole decode. x86 keeps the partial loads: they fold into pmovsx.
#if HWY_TARGET == HWY_WASM
#define GPT2_MATMUL_FULL_LOADS 1
#else
#define GPT2_MATMUL_FULL_LOADS 0
#endif

// ---- f16 -> f32 ------------------------------------------------------------------------------

// f32 from halves held in the upper 16 bits of int32 lanes (lower 16 bits zero), as an
// interleave with zero or a 16-bit lane load into odd lanes puts them. An arithmetic shift right
// by 3 moves the half's exponent and mantissa to the f32 fields (bits 23-27, 13-22) and copies
// the sign into bits 28-30, which the mask clears; the result is the half's value times 2^-112
// (a subnormal f32 for a subnormal half), so one multiply by 2^112 gives the value exactly.
// 4 operations per vector. Infinite or NaN halves are not supported (they come out as
// 2^16..2^17); ggml scales and real weights are finite.
HWY_INLINE VF ShiftedHalvesToF32(DF df, hn::Vec<hn::RebindToSigned<DF>> shifted) {
  const hn::RebindToSigned<DF> di32;
  const auto bits =
      hn::And(hn::ShiftRight<3>(shifted), hn::Set(di32, static_cast<int32_t>(0x8fffffffu)));
  return hn::Mul(hn::BitCast(df, bits), hn::Set(df, 5.192296858534828e+33f));  // 2^112
}

// 2 * kLanes halves at p to two f32 vectors. x86 with F16C (AVX2, AVX3) uses vcvtph2ps through
// Highway's PromoteTo. Elsewhere: an interleave with zero and ShiftedHalvesToF32 (normals and
// subnormals exact, like Highway's own emulation but cheaper).
HWY_INLINE void HalvesToF32(DF df, const uint16_t* HWY_RESTRICT p, VF& lo, VF& hi) {
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  const hn::Rebind<hwy::float16_t, DF> df16;
  const hwy::float16_t* h = reinterpret_cast<const hwy::float16_t*>(p);
  lo = hn::PromoteTo(df, hn::LoadU(df16, h));
  hi = hn::PromoteTo(df, hn::LoadU(df16, h + kLanes));
#elif HWY_TARGET == HWY_SCALAR
  lo = hn::Set(df, kernels_internal::HalfToFloat(p[0]));
  hi = hn::Set(df, kernels_internal::HalfToFloat(p[1]));
#else
  const hn::Repartition<uint16_t, DF> du16;
  const auto bits = hn::LoadU(du16, p);
  lo = ShiftedHalvesToF32(df, hn::BitCast(hn::RebindToSigned<DF>(),
                                          hn::InterleaveLower(du16, hn::Zero(du16), bits)));
  hi = ShiftedHalvesToF32(df, hn::BitCast(hn::RebindToSigned<DF>(),
                                          hn::InterleaveUpper(du16, hn::Zero(du16), bits)));
#endif
}

// ---- Weight decoders -------------------------------------------------------------------------

// Float rows: vectors [c, c + kLanes) and [c + kLanes, c + 2 kLanes).
HWY_INLINE void LoadWeightPair(DF df, const float* HWY_RESTRICT p, VF& a, VF& b) {
  a = hn::LoadU(df, p);
  b = hn::LoadU(df, p + kLanes);
}
HWY_INLINE void LoadWeightPair(DF df, const hwy::float16_t* HWY_RESTRICT p, VF& a, VF& b) {
  HalvesToF32(df, reinterpret_cast<const uint16_t*>(p), a, b);
}
// One vector, for the last kLanes..2 kLanes - 1 columns.
HWY_INLINE VF LoadWeights(DF df, const float* HWY_RESTRICT p) { return hn::LoadU(df, p); }
HWY_INLINE VF LoadWeights(DF df, const hwy::float16_t* HWY_RESTRICT p) {
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p));
}

HWY_INLINE float ScalarWeight(float w) { return w; }
HWY_INLINE float ScalarWeight(hwy::float16_t w) {
  uint16_t bits;
  std::memcpy(&bits, &w, sizeof(bits));
  return kernels_internal::HalfToFloat(bits);
}

#if GPT2_MATMUL_FULL_LOADS
// 16 int8 to 4 f32 vectors in order: two sign extensions (i8 -> i16 -> i32, wasm's
// extend_low/extend_high), then int -> float by the magic-number trick: the bits of
// 1.5 * 2^23 plus a small integer q are the float 1.5 * 2^23 + q, so one integer add and one
// float subtract give float(q) exactly. ConvertTo would be one instruction, but LLVM folds
// sitofp(sext(i16 vector)) into sitofp of the i16 vector, which the wasm backend scalarizes
// (8 extract_lane + convert + replace_lane per vector: ~6x slower decode).
HWY_INLINE VF SmallIntToF32(DF df, hn::Vec<hn::Full128<int32_t>> q) {
  const hn::Full128<int32_t> di32;
  return hn::Sub(hn::BitCast(df, hn::Add(q, hn::Set(di32, 0x4B400000))), hn::Set(df, 12582912.0f));
}
HWY_INLINE void Int8x16ToF32(DF df, hn::Vec<hn::Full128<int8_t>> v, VF* HWY_RESTRICT w) {
  const hn::Full128<int16_t> di16;
  const hn::Full128<int32_t> di32;
  const hn::Full64<int8_t> di8h;
  const hn::Full64<int16_t> di16h;
  const auto lo = hn::PromoteTo(di16, hn::LowerHalf(di8h, v));
  const auto hi = hn::PromoteTo(di16, hn::UpperHalf(di8h, v));
  w[0] = SmallIntToF32(df, hn::PromoteTo(di32, hn::LowerHalf(di16h, lo)));
  w[1] = SmallIntToF32(df, hn::PromoteTo(di32, hn::UpperHalf(di16h, lo)));
  w[2] = SmallIntToF32(df, hn::PromoteTo(di32, hn::LowerHalf(di16h, hi)));
  w[3] = SmallIntToF32(df, hn::PromoteTo(di32, hn::UpperHalf(di16h, hi)));
}
#endif

// Q8_0: the 32 quants of a block as kBlockVecs f32 vectors (unscaled; w = d * q).
HWY_INLINE void DecodeBlock(DF df, const BlockQ8_0* HWY_RESTRICT block,
                            VF (&w)[kBlockVecs]) {
#if GPT2_MATMUL_FULL_LOADS
  const hn::Full128<int8_t> di8;
  Int8x16ToF32(df, hn::LoadU(di8, block->qs), w);
  Int8x16ToF32(df, hn::LoadU(di8, block->qs + 16), w + 4);
#else
  // Wider targets: one sign-extending load (vpmovsxbd) per vector.
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<int8_t, DF> di8;
  for (size_t j = 0; j < kBlockVecs; ++j) {
    w[j] = hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(di8, block->qs + j * kLanes)));
  }
#endif
}

// Q4_0: weight i < 16 is the low nibble of qs[i], weight i >= 16 the high nibble of qs[i - 16];
// w = d * (nibble - 8) (format/quant.h, ggml dequantize_row_q4_0). Unscaled, like Q8_0.
HWY_INLINE void DecodeBlock(DF df, const BlockQ4_0* HWY_RESTRICT block,
                            VF (&w)[kBlockVecs]) {
#if GPT2_MATMUL_FULL_LOADS
  const hn::Full128<uint8_t> du8;
  const hn::Full128<int8_t> di8;
  const auto bytes = hn::LoadU(du8, block->qs);
  const auto eight = hn::Set(du8, 8);
  // nibble - 8 wraps in uint8 and reads back as the right int8.
  Int8x16ToF32(df, hn::BitCast(di8, hn::Sub(hn::And(bytes, hn::Set(du8, 0x0f)), eight)), w);
  Int8x16ToF32(df, hn::BitCast(di8, hn::Sub(hn::ShiftRight<4>(bytes), eight)), w + 4);
#else
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<uint8_t, DF> du8;
  for (size_t j = 0; j < kBlockVecs; ++j) {
    const size_t first = j * kLanes;
    const bool high = first >= 16;
    const auto bytes = hn::BitCast(
        di32, hn::PromoteTo(hn::RebindToUnsigned<DF>(),
                            hn::LoadU(du8, block->qs + (high ? first - 16 : first))));
    const auto nibbles = high ? hn::ShiftRight<4>(bytes) : hn::And(bytes, hn::Set(di32, 0x0f));
    w[j] = hn::ConvertTo(df, hn::Sub(nibbles, hn::Set(di32, 8)));
  }
#endif
}

// ---- Tiles: out[r][t] = sum_c x[t, c] * W[row r, c] for kR rows and kT tokens ---------------

// Float weights (f32, f16): two vectors per step (kStepVecs = 1: one), one more if kLanes
// columns remain, then the last cols % kLanes in scalar code. With one token each row keeps two accumulators so the
// FMA chains are 2 kR long-lived chains.
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

// ---- Int8 activations (QuantActivations::kInt8) ----------------------------------------------
//
// ggml's vec_dot_q8_0_q8_0 scheme: x is quantized once per product to Q8_0 blocks, then each
// weight block's dot with it is an integer multiply-add of int16 pairs (ReorderWidenMulAccumulate
// on i16: pmaddwd on x86, i32x4.dot_i16x8_s on WASM), exact in int32, converted to f32 once per
// block and scaled by dw * dx. Per row and block on WASM that is 4 widening loads and 4 dots
// instead of 12 widenings, 16 int->float steps and 8 multiply-adds of the f32 path.

using DI32 = hn::RebindToSigned<DF>;
#if HWY_TARGET == HWY_SCALAR
using DI16 = hn::Rebind<int16_t, DF>;  // one lane; Highway's scalar target has no wider vectors
#else
using DI16 = hn::Repartition<int16_t, DF>;  // twice the f32 lanes: pairs feed one int32 lane
#endif
using VI16 = hn::Vec<DI16>;
constexpr size_t kI16Lanes = hn::MaxLanes(DI16());
constexpr size_t kI16Vecs = 32 / kI16Lanes;  // int16 vectors per block of 32
static_assert(32 % kI16Lanes == 0, "a Q block must be whole int16 vectors");

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
  if (HWY_TARGET == HWY_WASM && T > 1) {
    kernels_internal::CacheLineAligned(a.q_by_block, static_cast<size_t>(T * cols));
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
  int16_t* HWY_RESTRICT q_by_block =
      HWY_TARGET == HWY_WASM && T > 1 ? kernels_internal::FirstOnCacheLine(a.q_by_block.data())
                                      : nullptr;
  for (int64_t t = t0; t < t1; ++t) {
    int16_t* HWY_RESTRICT q = a.q.data() + t * cols;
    float* HWY_RESTRICT d = a.d.data() + t * a.d_stride;
    for (int64_t b = 0; b < nb; ++b) {
      uint16_t d_bits;
      const int32_t sum = QuantizeBlock(x + t * cols + b * 32, q + b * 32, d_bits);
      d[b] = kernels_internal::HalfToFloat(d_bits);
      if (T > 1) a.d_by_block[b * T + t] = d[b];
      if (q_by_block != nullptr) std::memcpy(q_by_block + (b * T + t) * 32, q + b * 32, 64);
      if (q4_offset) {
        int32_t* HWY_RESTRICT o = a.q4_offset.data() + (t * nb + b) * kI32Lanes;
        o[0] = -8 * sum;
        for (size_t i = 1; i < kI32Lanes; ++i) o[i] = 0;
      }
    }
    for (int64_t b = nb; b < a.d_stride; ++b) d[b] = 0.0f;
  }
}

// Q8_0 weights of a block as int16 vectors, in order.
HWY_INLINE void BlockToI16(const BlockQ8_0* HWY_RESTRICT block, VI16 (&w)[kI16Vecs]) {
  const DI16 di16;
#if HWY_TARGET == HWY_WASM
  // v128.load8x8_s: load and sign extension in one (V8: one pmovsxbw from memory), where
  // Highway's 8-byte LoadU is a memcpy through the stack and extend_high a shuffle more.
  static_assert(kI16Lanes == 8, "WASM vectors are 128-bit");
  (void)di16;
  for (size_t j = 0; j < kI16Vecs; ++j) w[j] = VI16{wasm_i16x8_load8x8(block->qs + 8 * j)};
#else
  const hn::Rebind<int8_t, DI16> di8;  // x86: one vpmovsx{bw} from memory per vector
  for (size_t j = 0; j < kI16Vecs; ++j) {
    w[j] = hn::PromoteTo(di16, hn::LoadU(di8, block->qs + j * kI16Lanes));
  }
#endif
}

// Q4_0 nibbles of a block as int16 vectors, in order: weights 0..15 are the low nibbles of
// qs[0..15], weights 16..31 the high nibbles. Raw: the weight is nibble - 8, and the - 8 is
// applied once per block and token through Int8Activations::q4_offset.
HWY_INLINE void BlockToI16(const BlockQ4_0* HWY_RESTRICT block, VI16 (&w)[kI16Vecs]) {
  const DI16 di16;
#if HWY_TARGET == HWY_SCALAR
  for (size_t j = 0; j < 32; ++j) {
    const int nibble = j < 16 ? (block->qs[j] & 0x0f) : (block->qs[j - 16] >> 4);
    w[j] = hn::Set(di16, static_cast<int16_t>(nibble));
  }
#else
  const hn::RebindToUnsigned<DI16> du16;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  static_assert(kI16Lanes == 32, "AVX-512 has 32 int16 lanes");
  const hn::Half<decltype(du16)> du16h;
  const auto b = hn::PromoteTo(du16h, hn::LoadU(hn::Rebind<uint8_t, decltype(du16h)>(), block->qs));
  const auto nibbles =
      hn::Combine(du16, hn::ShiftRight<4>(b), hn::And(b, hn::Set(du16h, 0x0f)));
  w[0] = hn::BitCast(di16, nibbles);
#elif HWY_TARGET == HWY_AVX2
  static_assert(kI16Lanes == 16, "AVX2 has 16 int16 lanes");
  const auto b = hn::PromoteTo(du16, hn::LoadU(hn::Rebind<uint8_t, decltype(du16)>(), block->qs));
  w[0] = hn::BitCast(di16, hn::And(b, hn::Set(du16, 0x0f)));
  w[1] = hn::BitCast(di16, hn::ShiftRight<4>(b));
#elif HWY_TARGET == HWY_WASM
  // v128.load8x8_u (one pmovzxbw from memory in V8) per 8 bytes, then mask and shift.
  (void)di16;
  (void)du16;
  const v128_t lo = wasm_u16x8_load8x8(block->qs);      // qs[0..7]
  const v128_t hi = wasm_u16x8_load8x8(block->qs + 8);  // qs[8..15]
  const v128_t mask = wasm_i16x8_splat(0x0f);
  w[0] = VI16{wasm_v128_and(lo, mask)};
  w[1] = VI16{wasm_v128_and(hi, mask)};
  w[2] = VI16{wasm_u16x8_shr(lo, 4)};
  w[3] = VI16{wasm_u16x8_shr(hi, 4)};
#else
  // 128-bit targets (SSSE3, SSE4, EMU128): one full 16-byte load, widened in two halves.
  static_assert(kI16Lanes == 8, "expected 128-bit vectors");
  const hn::Full128<uint8_t> du8;
  const hn::Full64<uint8_t> du8h;
  const auto bytes = hn::LoadU(du8, block->qs);
  const auto lo = hn::PromoteTo(du16, hn::LowerHalf(du8h, bytes));  // qs[0..7]
  const auto hi = hn::PromoteTo(du16, hn::UpperHalf(du8h, bytes));  // qs[8..15]
  const auto mask = hn::Set(du16, 0x0f);
  w[0] = hn::BitCast(di16, hn::And(lo, mask));
  w[1] = hn::BitCast(di16, hn::And(hi, mask));
  w[2] = hn::BitCast(di16, hn::ShiftRight<4>(lo));
  w[3] = hn::BitCast(di16, hn::ShiftRight<4>(hi));
#endif
#endif  // HWY_TARGET == HWY_SCALAR
}

// The int32 vector a block's dot starts from: zero for Q8_0, the activations' -8 sum_i qx for
// Q4_0 (Int8Activations::q4_offset); t and b are the token and block.
HWY_INLINE hn::Vec<DI32> BlockDotStart(const BlockQ8_0*, const Int8Activations&, int64_t,
                                        int64_t, int64_t) {
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
  const auto s01 = hn::Add(hn::InterleaveLower(di32, v[0], v[1]), hn::InterleaveUpper(di32, v[0], v[1]));
  const auto s23 = hn::Add(hn::InterleaveLower(di32, v[2], v[3]), hn::InterleaveUpper(di32, v[2], v[3]));
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
  constexpr bool kPackTokens =
      HWY_TARGET != HWY_SCALAR && kT == 4 && kLanes == 4 && kI32Lanes == 4;
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
            dots[t] = BlockDot(w, q,
                               BlockDotStart(rows[0], a, t0 + static_cast<int64_t>(t), num_blocks, b));
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

#if HWY_TARGET == HWY_WASM
// One block of 4 rows (rows[i] + b): the 4 block dots, summed into the lanes of one vector
// (SumEachOf4) and scaled by dw * dx (the f32 product ggml forms), lane i = row i. The 4 rows'
// f16 scales are lane loads into the odd 16-bit lanes, where ShiftedHalvesToF32 wants them.
template <typename Block>
HWY_INLINE VF GroupBlock(const Block* HWY_RESTRICT const* rows, int64_t b,
                         const VI16 (&q)[kI16Vecs], hn::Vec<DI32> start, VF dx) {
  const DF df;
  hn::Vec<DI32> dots[4];
  v128_t halves = wasm_i32x4_splat(0);
  for (size_t i = 0; i < 4; ++i) {
    VI16 wv[kI16Vecs];
    BlockToI16(rows[i] + b, wv);
    dots[i] = BlockDot(wv, q, start);
  }
  halves = wasm_v128_load16_lane(&rows[0][b].d, halves, 1);
  halves = wasm_v128_load16_lane(&rows[1][b].d, halves, 3);
  halves = wasm_v128_load16_lane(&rows[2][b].d, halves, 5);
  halves = wasm_v128_load16_lane(&rows[3][b].d, halves, 7);
  const VF scale = hn::Mul(ShiftedHalvesToF32(df, hn::Vec<DI32>{halves}), dx);
  return hn::Mul(hn::ConvertTo(df, SumEachOf4(dots)), scale);
}

// Decode (T == 1) with int8 activations on WASM: y[r] = bias[r] + sum_b (dw[r, b] dx[b]) *
// dot(qw[r, b], qx[b]) for the 4 kGroups rows r + i * row_step (ForEachStridedTile), kGroups
// groups of 4 rows. Packing a group's 4 rows into one vector makes the int -> float convert,
// the scale and the accumulate one vector operation per group and block instead of one per row,
// with the accumulator in a register: lane i holds row i, summed block after block as in the
// scalar twin (no final horizontal sum). Against Int8Tile's 64-row tiles, whole GPT-2 small
// decode under Node went from ~37.5 to ~47.5 tokens per CPU second (Q8_0) and ~43 to ~64 (Q4_0),
// alternating A/B at load 6-8.
template <size_t kGroups, typename Block>
HWY_NOINLINE void Int8DecodeGroups(const Int8Activations& a, const WeightView& w,
                                   const float* HWY_RESTRICT bias, float* HWY_RESTRICT y,
                                   int64_t r, int64_t row_step) {
  const DF df;
  const DI16 di16;
  const int64_t nb = w.cols / 32;
  const int16_t* HWY_RESTRICT qx = a.q.data();
  const float* HWY_RESTRICT dx = a.d.data();
  constexpr int64_t kRows = 4 * kGroups;
  const Block* HWY_RESTRICT rows[kRows];
  for (int64_t i = 0; i < kRows; ++i) {
    rows[i] = static_cast<const Block*>(w.data) + (r + i * row_step) * nb;
  }
  VF acc[kGroups];
  for (size_t g = 0; g < kGroups; ++g) acc[g] = hn::Zero(df);
  for (int64_t b = 0; b < nb; ++b) {
    VI16 q[kI16Vecs];
    for (size_t j = 0; j < kI16Vecs; ++j) q[j] = hn::LoadU(di16, qx + b * 32 + j * kI16Lanes);
    const auto start = BlockDotStart(rows[0], a, 0, nb, b);
    const VF dxb = hn::Set(df, dx[b]);
    for (size_t g = 0; g < kGroups; ++g) {
      acc[g] = hn::Add(acc[g], GroupBlock(rows + 4 * g, b, q, start, dxb));
    }
  }
  for (size_t g = 0; g < kGroups; ++g) {
    HWY_ALIGN float lanes[4];
    hn::Store(acc[g], df, lanes);
    for (size_t i = 0; i < 4; ++i) {
      const int64_t row = r + static_cast<int64_t>(4 * g + i) * row_step;
      y[row] = lanes[i] + (bias != nullptr ? bias[row] : 0.0f);
    }
  }
}

// V8 (TurboFan) schedules a basic block's memory loads ahead of its arithmetic, so a block step
// that loads 20 vectors and combines them holds all 20 at once and spills to the stack. A store
// is an ordering point: the loads after it in the code stay after it, and the value it stores
// is computed before it. Storing each partial result to a volatile stack slot thus splits the
// step into phases whose working sets fit the 16 vector registers (1 store per phase).
HWY_INLINE void PhaseEnd(volatile v128_t& sink, v128_t v) { sink = v; }

// Rows [r0, r1) of a decode in Int8DecodeGroups tiles, then single groups; returns where the
// last 0-3 rows begin.
template <typename Block>
HWY_INLINE int64_t Int8Decode(const Int8Activations& a, const WeightView& w,
                              const float* HWY_RESTRICT bias, float* HWY_RESTRICT y, int64_t r0,
                              int64_t r1) {
  constexpr int64_t kTile = 4 * kInt8DecodeGroups;
  const int64_t groups_begin = ForEachStridedTile<kTile>(r0, r1, [&](int64_t r, int64_t step) {
    Int8DecodeGroups<kInt8DecodeGroups, Block>(a, w, bias, y, r, step);
  });
  return ForEachStridedTile<4>(groups_begin, r1, [&](int64_t r, int64_t step) {
    Int8DecodeGroups<1, Block>(a, w, bias, y, r, step);
  });
}
#endif

// The block-quantized cases of RunTile: Q8_0 and Q4_0 differ only in their block type.
template <size_t kR, size_t kT, typename Block>
HWY_INLINE void BlockTile(const float* HWY_RESTRICT xt, const Int8Activations* qa, int64_t t0,
                          const WeightView& w, int64_t r0, int64_t row_step,
                          float (&out)[kR][kT]) {
  const int64_t cols = w.cols;
  const Block* rows[kR];
  for (size_t r = 0; r < kR; ++r) {
    rows[r] = static_cast<const Block*>(w.data) +
              (r0 + static_cast<int64_t>(r) * row_step) * (cols / 32);
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
HWY_INLINE void StoreTile(const float (&out)[kR][kT], const float* HWY_RESTRICT bias,
                          int64_t rows, int64_t t0, int64_t r0, int64_t row_step,
                          float* HWY_RESTRICT y) {
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
    case 3: tile(std::integral_constant<size_t, 3>(), t0); break;
    case 2: tile(std::integral_constant<size_t, 2>(), t0); break;
    case 1: tile(std::integral_constant<size_t, 1>(), t0); break;
    default: break;
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
        rows[r] = static_cast<const float*>(w.data) +
                  (r0 + static_cast<int64_t>(r) * row_step) * cols;
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
HWY_NOINLINE void DequantizedRowGroup(const float* HWY_RESTRICT x, int64_t T,
                                      const WeightView& w, const float* HWY_RESTRICT bias,
                                      float* HWY_RESTRICT y, int64_t r0) {
  const int64_t cols = w.cols;
  // Per thread (the model splits one product's rows over threads); grows only.
  // Aligned: with AVX-512 every FloatTile load of a row 16 floats off a cache line would
  // straddle two (native Q8_0 prefill 600 -> 700 tok/s, one thread).
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

#if HWY_TARGET == HWY_WASM
// Int8-activation prefill on WASM, kRows rows (rows[i]) x tokens [t0, t0 + 4 kGroups): acc[i][g]
// lane l = row i, token t0 + 4 g + l, the same arithmetic as Int8Tile's 4-token tiles (each
// group's 4 token dots of a block summed into the lanes of one vector, scaled by dx * dw,
// accumulated block after block; the same bits). Per block: the rows' weights widened once for
// all the tokens, then one phase per token: its 4 qx vectors, loaded once for all kRows rows, and
// the rows' dots, stored to the stack (V8 would otherwise hoist every token's loads ahead of the
// arithmetic and spill; see PhaseEnd); dw comes converted (dws[i][b]), once per row rather than
// once per tile.
template <size_t kRows, size_t kGroups, typename Block>
HWY_INLINE void Int8PrefillTokens(const Int8Activations& a, const int16_t* HWY_RESTRICT q_by_block,
                                  int64_t t0, int64_t cols, const Block* HWY_RESTRICT const* rows,
                                  const float* HWY_RESTRICT const* dws, VF (&acc)[kRows][kGroups]) {
  const DF df;
  const DI16 di16;
  const int64_t nb = cols / 32, T = a.T;
  const float* HWY_RESTRICT dx = a.d_by_block.data() + t0;
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t g = 0; g < kGroups; ++g) acc[i][g] = hn::Zero(df);
  }
  volatile v128_t dots[kRows][4];
  for (int64_t b = 0; b < nb; ++b) {
    VI16 w[kRows][kI16Vecs];
    for (size_t i = 0; i < kRows; ++i) BlockToI16(rows[i] + b, w[i]);
    for (size_t g = 0; g < kGroups; ++g) {
      for (size_t l = 0; l < 4; ++l) {
        const int64_t t = t0 + static_cast<int64_t>(4 * g + l);
        VI16 q[kI16Vecs];
        const int16_t* HWY_RESTRICT qt = q_by_block + ((b * T + t) * 32);
        for (size_t j = 0; j < kI16Vecs; ++j) q[j] = hn::LoadU(di16, qt + 8 * j);
        for (size_t i = 0; i < kRows; ++i) {
          dots[i][l] = BlockDot(w[i], q, BlockDotStart(rows[i], a, t, nb, b)).raw;
        }
      }
      const VF dxg = hn::LoadU(df, dx + b * a.T + static_cast<int64_t>(4 * g));
      for (size_t i = 0; i < kRows; ++i) {
        const hn::Vec<DI32> d[4] = {{dots[i][0]}, {dots[i][1]}, {dots[i][2]}, {dots[i][3]}};
        const VF scale = hn::Mul(dxg, hn::Set(df, dws[i][b]));
        acc[i][g] = hn::Add(hn::Mul(hn::ConvertTo(df, SumEachOf4(d)), scale), acc[i][g]);
      }
    }
  }
}

// Rows r, ..., r + kRows - 1 of an int8-activation prefill on WASM: their block scales converted
// once, then kGroups x 4 tokens per pass over the rows (Int8PrefillTokens), then 4, then the last
// 0-3 tokens in RunTile, one row at a time.
template <size_t kRows, size_t kGroups, typename Block>
HWY_INLINE void Int8PrefillRowGroup(const float* x, const Int8Activations& a,
                                    const int16_t* HWY_RESTRICT q_by_block, const WeightView& w,
                                    const float* HWY_RESTRICT bias, float* HWY_RESTRICT y,
                                    int64_t r, float* HWY_RESTRICT dw_scratch) {
  const DF df;
  const int64_t nb = w.cols / 32, T = a.T;
  const Block* HWY_RESTRICT rows[kRows];
  const float* HWY_RESTRICT dws[kRows];
  for (size_t i = 0; i < kRows; ++i) {
    rows[i] = static_cast<const Block*>(w.data) + (r + static_cast<int64_t>(i)) * nb;
    float* dw = dw_scratch + static_cast<int64_t>(i) * nb;
    for (int64_t b = 0; b < nb; ++b) dw[b] = kernels_internal::HalfToFloat(rows[i][b].d);
    dws[i] = dw;
  }
  int64_t t0 = 0;
  const auto store = [&](const auto& acc, size_t groups) {
    for (size_t i = 0; i < kRows; ++i) {
      const int64_t row = r + static_cast<int64_t>(i);
      const float bias_r = bias != nullptr ? bias[row] : 0.0f;
      for (size_t g = 0; g < groups; ++g) {
        HWY_ALIGN float lanes[4];
        hn::Store(acc[i][g], df, lanes);
        for (int64_t l = 0; l < 4; ++l) {
          y[(t0 + static_cast<int64_t>(4 * g) + l) * w.rows + row] = lanes[l] + bias_r;
        }
      }
    }
  };
  for (; t0 + 4 * static_cast<int64_t>(kGroups) <= T; t0 += 4 * kGroups) {
    VF acc[kRows][kGroups];
    Int8PrefillTokens<kRows, kGroups>(a, q_by_block, t0, w.cols, rows, dws, acc);
    store(acc, kGroups);
  }
  for (; t0 + 4 <= T; t0 += 4) {
    VF acc[kRows][1];
    Int8PrefillTokens<kRows, 1>(a, q_by_block, t0, w.cols, rows, dws, acc);
    store(acc, 1);
  }
  for (size_t i = 0; i < kRows; ++i) {
    const int64_t row = r + static_cast<int64_t>(i);
    switch (T - t0) {
      case 3: RunTile<1, 3>(x, &a, t0, w, bias, y, row); break;
      case 2: RunTile<1, 2>(x, &a, t0, w, bias, y, row); break;
      case 1: RunTile<1, 1>(x, &a, t0, w, bias, y, row); break;
      default: break;
    }
  }
}

// Rows [r0, r1) of an int8-activation prefill on WASM, kPrefillPairRows rows at a time, then the
// last row alone.
template <typename Block>
HWY_NOINLINE void Int8PrefillRows(const float* x, const Int8Activations& a, const WeightView& w,
                                  const float* HWY_RESTRICT bias, float* HWY_RESTRICT y,
                                  int64_t r0, int64_t r1) {
  const int64_t nb = w.cols / 32;
  static thread_local std::vector<float> dws;
  if (dws.size() < static_cast<size_t>(kPrefillRowsWasm * nb)) {
    dws.resize(static_cast<size_t>(kPrefillRowsWasm * nb));
  }
  // Written once per product by QuantizeActivations (Int8Activations::q_by_block).
  const int16_t* q_by_block = kernels_internal::FirstOnCacheLine(a.q_by_block.data());
  int64_t r = r0;
  for (; r + static_cast<int64_t>(kPrefillRowsWasm) <= r1; r += kPrefillRowsWasm) {
    Int8PrefillRowGroup<kPrefillRowsWasm, kPrefillGroups, Block>(x, a, q_by_block, w, bias, y, r,
                                                                  dws.data());
  }
  for (; r < r1; ++r) {
    Int8PrefillRowGroup<1, kPrefillGroups, Block>(x, a, q_by_block, w, bias, y, r, dws.data());
  }
}
#endif

#if HWY_TARGET == HWY_AVX3_DL
// ---- Int8-activation prefill with AVX-512 VNNI (AVX3_DL) -------------------------------------
//
// vpdpbusd multiplies 4 unsigned by 4 signed bytes and adds the 4 products into an int32 lane:
// 64 multiply-adds per instruction where an f32 FMA does 16, and no widening. Int8Tile's layout
// (a block's 32 weights across the lanes) would still need a horizontal sum per block, row and
// token; here lane l of a vector is row r + l instead, so each lane sums its own row's block dot
// and the dot needs no reduction: PackRowGroup repacks 16 rows once per call so that vector k of
// a block holds the 16 rows' columns 4k..4k+3, and each token's 4 quants of those columns are
// broadcast to all lanes (a memory operand). Per 16 rows, token and block: 8 vpdpbusd, a
// broadcast start value, a convert, the dw * dx multiply and one FMA; the f32 path
// (DequantizedRowGroup) does 32 FMAs.
//
// The weights are the unsigned operand: Q8_0 quants with the sign bit flipped (q + 128), Q4_0
// raw nibbles (q + 8), the o = 128 or 8 taken back through each block's start value
// -o * sum_i qx (Int8Activations::vnni_start), exact in int32 (|sum| <= 32 * 255 * 128). So the
// block dots are Int8Tile's exactly; each row then adds its blocks' float(dot) * (dw * dx) in
// block order with one FMA each, the same whatever the tiling (each lane is one row and token),
// so rows get the same bits however a product is split.
//
// Highway 1.0.3's AVX3_DL target string names avxvnni (the VEX form) but not avx512vnni, which
// _mm512_dpbusd_epi32 needs: the functions below are compiled with it added, and only called,
// never inlined, from code compiled without it. Highway's own attributes are popped first and
// pushed again after them: clang keeps the outer of two nested target attributes.
HWY_POP_ATTRIBUTES
HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR ",avx512vnni")

constexpr int64_t kVnniRows = 16;  // int32 lanes of a 512-bit vector: one weight row each
// Tokens per pass over a row group's packed blocks: their 16 f32 accumulators, the block's 8
// weight vectors, its scales and 3 temporaries take 28 of the 32 vector registers. MatMul T = 64,
// Q8_0 qkv / fc / proj GFLOP/s, best of 3 at load 1.4-4.8 (2026-12-02): 8 tokens 385 / 388 /
// 402, 12 466 / 466 / 420, 16 478 / 472 / 440.
constexpr int64_t kVnniTokens = 16;
static_assert(kMatMulRowGrain % kVnniRows == 0, "row groups must not straddle a row grain");
// One packed block: 8 vectors of weight bytes, then the 16 rows' dw as f32.
constexpr int64_t kVnniBlockBytes = 8 * 64 + kVnniRows * 4;

// Block's 32 weights as the unsigned bytes above, in column order.
HWY_INLINE __m256i VnniWeightBytes(const BlockQ8_0* HWY_RESTRICT block) {
  return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block->qs)),
                          _mm256_set1_epi8(static_cast<char>(0x80)));
}
HWY_INLINE __m256i VnniWeightBytes(const BlockQ4_0* HWY_RESTRICT block) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block->qs));
  const __m128i mask = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), mask),
                          _mm_and_si128(bytes, mask));
}

// Rows [r, r + n), n <= 16, of w into packed (kVnniBlockBytes per block, 64-byte aligned):
// block b's vector k, lane l = row r + l's weight bytes 4k..4k+3. Lanes l >= n repeat row
// r + n - 1 (never stored). The 16 x 8 transpose of 4-byte groups starts from
// z[j] = [row j | row j + 8] (lane 8h + k = row j + 8h, group k) and takes three rounds of
// two-source permutes, round p exchanging bit p of the vector index with bit p of the lane
// index; after them z[k] lane j + 8h = row j + 8h, group k.
template <typename Block>
HWY_NOINLINE void PackRowGroup(const WeightView& w, int64_t r, int64_t n,
                               uint8_t* HWY_RESTRICT packed) {
  const int64_t nb = w.cols / 32;
  const Block* HWY_RESTRICT rows[kVnniRows];
  for (int64_t l = 0; l < kVnniRows; ++l) {
    rows[l] = static_cast<const Block*>(w.data) + (r + HWY_MIN(l, n - 1)) * nb;
  }
  __m512i perm[3][2];
  for (int p = 0; p < 3; ++p) {
    for (int c = 0; c < 2; ++c) {
      HWY_ALIGN int32_t index[16];
      for (int pos = 0; pos < 16; ++pos) {
        index[pos] = (pos & ~(1 << p)) | (c << p) | (((pos >> p) & 1) << 4);
      }
      perm[p][c] = _mm512_load_si512(index);
    }
  }
  for (int64_t b = 0; b < nb; ++b) {
    __m512i z[8];
    for (int j = 0; j < 8; ++j) {
      z[j] = _mm512_inserti64x4(_mm512_castsi256_si512(VnniWeightBytes(rows[j] + b)),
                                VnniWeightBytes(rows[j + 8] + b), 1);
    }
    for (int p = 0; p < 3; ++p) {
      for (int j = 0; j < 8; ++j) {
        if (j & (1 << p)) continue;
        const __m512i lo = z[j], hi = z[j | (1 << p)];
        z[j] = _mm512_permutex2var_epi32(lo, perm[p][0], hi);
        z[j | (1 << p)] = _mm512_permutex2var_epi32(lo, perm[p][1], hi);
      }
    }
    uint8_t* HWY_RESTRICT out = packed + b * kVnniBlockBytes;
    for (int k = 0; k < 8; ++k) _mm512_store_si512(out + 64 * k, z[k]);
    HWY_ALIGN uint16_t d[kVnniRows];
    for (int64_t l = 0; l < kVnniRows; ++l) d[l] = rows[l][b].d;
    const __m256i d_bits = _mm256_load_si256(reinterpret_cast<const __m256i*>(d));
    _mm512_store_ps(out + 8 * 64, _mm512_cvtph_ps(d_bits));
  }
}

// acc[t] lane l = sum_b float(dot(qw[r + l, b], qx[t0 + t, b])) * (dw * dx), for a row group
// packed by PackRowGroup, tokens t0..t0 + kT - 1 (pad tokens give 0).
template <int64_t kT>
HWY_INLINE void VnniTile(const Int8Activations& a, int64_t t0, int64_t nb,
                         const uint8_t* HWY_RESTRICT packed, __m512 (&acc)[kT]) {
  for (int64_t t = 0; t < kT; ++t) acc[t] = _mm512_setzero_ps();
  const int64_t T = a.vnni_T;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* HWY_RESTRICT block = packed + b * kVnniBlockBytes;
    __m512i wv[8];
    for (int k = 0; k < 8; ++k) wv[k] = _mm512_load_si512(block + 64 * k);
    const __m512 dw = _mm512_load_ps(block + 8 * 64);
    const int8_t* HWY_RESTRICT q = a.vnni_q.data() + (b * T + t0) * 32;
    const int32_t* HWY_RESTRICT start = a.vnni_start.data() + b * T + t0;
    const float* HWY_RESTRICT dx = a.vnni_dx.data() + b * T + t0;
    // Unrolled, or GCC 12 turns the token loop inside out (tokens innermost, 2 blocks per step)
    // and keeps the accumulators on the stack: 12 tokens ~420 -> ~450 GFLOP/s.
#pragma GCC unroll 16
    for (int64_t t = 0; t < kT; ++t) {
      __m512i dot = _mm512_set1_epi32(start[t]);
      for (int k = 0; k < 8; ++k) {
        int32_t x4;
        std::memcpy(&x4, q + t * 32 + 4 * k, 4);
        dot = _mm512_dpbusd_epi32(dot, wv[k], _mm512_set1_epi32(x4));
      }
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(dx[t]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[t]);
    }
  }
}

// Rows [r0, r1) of an int8-activation prefill: 16 rows at a time (the last group masked),
// packed once, then all tokens, kVnniTokens per pass and the rest 4 at a time.
template <typename Block>
HWY_NOINLINE void VnniPrefill(const Int8Activations& a, const WeightView& w,
                              const float* HWY_RESTRICT bias, float* HWY_RESTRICT y, int64_t r0,
                              int64_t r1) {
  const int64_t nb = w.cols / 32;
  static thread_local std::vector<uint8_t> scratch;  // per thread; grows only
  uint8_t* packed =
      kernels_internal::CacheLineAligned(scratch, static_cast<size_t>(nb * kVnniBlockBytes));
  for (int64_t r = r0; r < r1; r += kVnniRows) {
    const int64_t n = HWY_MIN(kVnniRows, r1 - r);
    PackRowGroup<Block>(w, r, n, packed);
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
    const __m512 bias_v =
        bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias + r) : _mm512_setzero_ps();
    const auto store = [&](const auto& acc, int64_t t0) {
      const int64_t tokens = HWY_MIN(static_cast<int64_t>(std::size(acc)), a.T - t0);
      for (int64_t t = 0; t < tokens; ++t) {
        _mm512_mask_storeu_ps(y + (t0 + t) * w.rows + r, mask, _mm512_add_ps(acc[t], bias_v));
      }
    };
    int64_t t0 = 0;
    for (; t0 + kVnniTokens <= a.vnni_T; t0 += kVnniTokens) {
      __m512 acc[kVnniTokens];
      VnniTile<kVnniTokens>(a, t0, nb, packed, acc);
      store(acc, t0);
    }
    for (; t0 < a.vnni_T; t0 += 4) {  // vnni_T is a multiple of 4
      __m512 acc[4];
      VnniTile<4>(a, t0, nb, packed, acc);
      store(acc, t0);
    }
  }
}

HWY_POP_ATTRIBUTES
HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR)  // HWY_BEFORE_NAMESPACE's again, for HWY_AFTER_NAMESPACE
#endif  // HWY_TARGET == HWY_AVX3_DL

}  // namespace matmul

HWY_NOINLINE QuantActivations FastestQuantActivationsKernel(int64_t T) {
  return T > 1 && matmul::kFloatPrefillFaster ? QuantActivations::kFloat : QuantActivations::kInt8;
}

// Kernels.h StartMatMulInput: `in` takes the arguments (checked by kernels.cc) and is sized for
// QuantizeRowsKernel.
HWY_NOINLINE void StartMatMulInputKernel(const float* x, int64_t T, const WeightView& w,
                                         QuantActivations act,
                                         kernels_internal::MatMulInputData& in) {
  in.x = x;
  in.T = T;
  in.cols = w.cols;
  in.type = w.type;
  in.act = act == QuantActivations::kFastest ? FastestQuantActivationsKernel(T) : act;
  in.quantized = (w.type == TensorType::kQ8_0 || w.type == TensorType::kQ4_0) &&
                 in.act == QuantActivations::kInt8;
  in.target = HWY_TARGET;
  if (in.quantized) {
    matmul::SizeActivations(T, w.cols, w.type == TensorType::kQ4_0, in.q);
  }
}

// Kernels.h PrepareMatMulInputRows for an input that quantizes x (checked by kernels.cc).
HWY_NOINLINE void QuantizeRowsKernel(kernels_internal::MatMulInputData& in, int64_t t0,
                                     int64_t t1) {
  matmul::QuantizeActivations(in.x, t0, t1, in.cols, in.type == TensorType::kQ4_0, in.q);
}

static_assert(kMatMulRowGrain % matmul::kDecodeRows == 0 &&
                  kMatMulRowGrain % (4 * matmul::kInt8DecodeGroups) == 0 &&
                  kMatMulRowGrain % matmul::kPrefillRows == 0 &&
                  kMatMulRowGrain % matmul::kFmaPrefillRows == 0,
              "every row tile of MatMulKernel must divide kMatMulRowGrain (kernels.h)");

// `in` was prepared by this target for w's type and cols (checked by kernels.cc).
HWY_NOINLINE void MatMulKernel(const kernels_internal::MatMulInputData& in, const WeightView& w,
                               const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  const float* x = in.x;
  const int64_t T = in.T;
  if (T > 1 && in.act == QuantActivations::kFloat &&
      (w.type == TensorType::kQ8_0 || w.type == TensorType::kQ4_0)) {
    if (w.type == TensorType::kQ8_0) {
      matmul::DequantizedPrefill<BlockQ8_0>(x, T, w, bias, y, row_begin, row_end);
    } else {
      matmul::DequantizedPrefill<BlockQ4_0>(x, T, w, bias, y, row_begin, row_end);
    }
    return;
  }
  const matmul::Int8Activations* qa = in.quantized ? &in.q : nullptr;
  int64_t r = row_begin;
  if (T == 1) {
#if HWY_TARGET == HWY_WASM
    if (qa != nullptr) {
      r = w.type == TensorType::kQ8_0
              ? matmul::Int8Decode<BlockQ8_0>(*qa, w, bias, y, r, row_end)
              : matmul::Int8Decode<BlockQ4_0>(*qa, w, bias, y, r, row_end);
    }
#endif
    r = matmul::ForEachStridedTile<matmul::kDecodeRows>(
        r, row_end, [&](int64_t r0, int64_t step) {
          matmul::RunTile<matmul::kDecodeRows, 1>(x, qa, 0, w, bias, y, r0, step);
        });
  } else {
#if HWY_TARGET == HWY_AVX3_DL
    if (qa != nullptr) {
      if (w.type == TensorType::kQ8_0) {
        matmul::VnniPrefill<BlockQ8_0>(*qa, w, bias, y, r, row_end);
      } else {
        matmul::VnniPrefill<BlockQ4_0>(*qa, w, bias, y, r, row_end);
      }
      return;
    }
#endif
#if HWY_TARGET == HWY_WASM
    if (qa != nullptr) {
      if (w.type == TensorType::kQ8_0) {
        matmul::Int8PrefillRows<BlockQ8_0>(x, *qa, w, bias, y, r, row_end);
      } else {
        matmul::Int8PrefillRows<BlockQ4_0>(x, *qa, w, bias, y, r, row_end);
      }
      return;
    }
#endif
#if HWY_TARGET == HWY_WASM
    if (qa == nullptr && gpt2_wasm_relaxed()) {
      for (; r + static_cast<int64_t>(matmul::kFmaPrefillRows) <= row_end;
           r += matmul::kFmaPrefillRows) {
        matmul::RunRowGroup<matmul::kFmaPrefillRows, 1>(x, qa, T, w, bias, y, r);
      }
    }
#endif
    for (; r + static_cast<int64_t>(matmul::kPrefillRows) <= row_end;
         r += matmul::kPrefillRows) {
      matmul::RunRowGroup<matmul::kPrefillRows>(x, qa, T, w, bias, y, r);
    }
  }
  for (; r < row_end; ++r) matmul::RunRowGroup<1>(x, qa, T, w, bias, y, r);
}

}  // namespace HWY_NAMESPACE
}  // namespace gpt2
HWY_AFTER_NAMESPACE();

#undef GPT2_MATMUL_FULL_LOADS
#endif  // GPT2_KERNELS_MATMUL_INL_H_
