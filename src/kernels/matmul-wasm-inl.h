// The WASM-only paths of MatMul (matmul-inl.h) with int8 activations, written against V8's code
// generation with raw wasm_* intrinsics where Highway 1.0.3's ops cost more: decode in groups of
// 4 rows packed into one vector (Int8Decode) and prefill over 2 rows x 8 tokens
// (Int8PrefillRows), its block dots on int16 pairs or, where the engine makes relaxed SIMD's
// byte dot exact, on 4-byte groups over 2 rows x 16 tokens. Included once per Highway target,
// through matmul-inl.h; empty but for its constants on every other target.
#if defined(GPT2_KERNELS_MATMUL_WASM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GPT2_KERNELS_MATMUL_WASM_INL_H_
#undef GPT2_KERNELS_MATMUL_WASM_INL_H_
#else
#define GPT2_KERNELS_MATMUL_WASM_INL_H_
#endif

#include <hwy/highway.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "format/quant.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"
#include "kernels/matmul-decode-inl.h"
#include "kernels/matmul-int8-inl.h"
#include "kernels/matmul-tiling-inl.h"
#include "kernels/relaxed_simd.h"

// The constants on every target (matmul-inl.h checks them against kMatMulRowGrain); outside
// HWY_BEFORE_NAMESPACE, whose target attribute clang reports as unused where no code follows.
namespace gpt2 {
namespace HWY_NAMESPACE {
namespace matmul {

// Groups of 4 rows per Int8DecodeGroups step: more rows' streams keep more memory requests in
// flight, fewer keep the step in V8's 16 vector registers. BENCHMARKS-history.md
// "kInt8DecodeGroups".
constexpr int64_t kInt8DecodeGroups = 2;
// WASM int8 prefill (Int8PrefillRows): kPrefillRowsWasm rows x kPrefillGroups groups of 4 tokens
// per pass, the most live vectors V8's 16 registers hold. BENCHMARKS-history.md "kPrefillGroups".
constexpr size_t kPrefillGroups = 2;
constexpr size_t kPrefillRowsWasm = 2;
// The same with 4-byte dots (Int8PrefillTokensBytes), whose passes hold rows x groups dot
// vectors and as many accumulators, a token vector per group and a weight splat: more groups
// share each splat, more rows each token vector. BENCHMARKS-history.md "kBytePrefillGroups".
constexpr size_t kBytePrefillRows = 2;
constexpr size_t kBytePrefillGroups = 4;
// The same with int16 pair dots (Int8PrefillTokensPairs), whose passes hold the same vectors.
// BENCHMARKS-history.md "kPairPrefillRows".
constexpr size_t kPairPrefillRows = 4;
constexpr size_t kPairPrefillGroups = 2;

}  // namespace matmul
}  // namespace HWY_NAMESPACE
}  // namespace gpt2

#if HWY_TARGET == HWY_WASM
HWY_BEFORE_NAMESPACE();
namespace gpt2 {
namespace HWY_NAMESPACE {
namespace matmul {

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
// scalar twin (no final horizontal sum). BENCHMARKS-history.md "kInt8DecodeGroups" has it
// against Int8Tile's 64-row tiles, which it replaced.
template <size_t kGroups, typename Block>
HWY_NOINLINE void Int8DecodeGroups(const Int8Activations& a, const WeightView& w,
                                   const float* HWY_RESTRICT bias, float* HWY_RESTRICT y, int64_t r,
                                   int64_t row_step) {
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
  const int64_t row_bytes = w.cols / 32 * static_cast<int64_t>(sizeof(Block));
  const int64_t groups_begin = ForEachStridedTile<kTile>(
      r0, r1,
      [&](int64_t r, int64_t step) {
        Int8DecodeGroups<kInt8DecodeGroups, Block>(a, w, bias, y, r, step);
      },
      row_bytes);
  return ForEachStridedTile<4>(groups_begin, r1, [&](int64_t r, int64_t step) {
    Int8DecodeGroups<1, Block>(a, w, bias, y, r, step);
  });
}

// ---- 4-byte dots (kernels.h Int8DotPath) ----------------------------------------------------
//
// i32x4.relaxed_dot_i8x16_i7x16_add_s multiplies 16 byte pairs per instruction where
// i32x4.dot_i16x8_s multiplies 8 int16 pairs, after a widening of both: with AVX-VNNI (V8:
// vpdpbusd) or ARM's sdot, half the multiplies and none of the widenings. Its result is only
// defined for b's bytes below 128, which Q8_0's signed quants are not; so a probe asks this
// engine what it computes (relaxed_simd.h lists the lowerings) and the kernels use it only as
// an exact dot, with the weights as b: Q8_0 quants with the sign bit flipped (q + 128) where b
// reads unsigned, as they are where it reads signed; Q4_0's raw nibbles (q + 8) either way; the
// offset comes back through each block's start, -o sum_i qx, exact in int32.

// c + the dot of each 4-byte group of a and b, exact: the relaxed instruction (RelaxedDot),
// where the probe found it to be this, or plain SIMD128 (ExactDot: the bytes widened to int16,
// the pair dots, and each two adjacent pair dots added), which the probe compares it with and
// the tests force.
// What Int8PrefillRows multiplies with: kernels.h Int8DotPath, resolved. kPairs is
// kernels_internal::kWasmDotPairs.
enum class DotKind {
  kWidened,
  kRelaxedUnsignedB,
  kRelaxedSignedB,
  kExactUnsignedB,
  kExactSignedB,
  kPairs
};
static_assert(static_cast<int>(DotKind::kPairs) == kernels_internal::kWasmDotPairs);

template <bool kUnsigned>
struct RelaxedDot {
  static constexpr DotKind kKind =
      kUnsigned ? DotKind::kRelaxedUnsignedB : DotKind::kRelaxedSignedB;
  static constexpr bool kUnsignedB = kUnsigned;
  static HWY_INLINE v128_t Dot(v128_t a, v128_t b, v128_t c) {
    return gpt2_wasm_dot_i8x16_i7x16_add(a, b, c);
  }
};
template <bool kUnsigned>
struct ExactDot {
  static constexpr DotKind kKind = kUnsigned ? DotKind::kExactUnsignedB : DotKind::kExactSignedB;
  static constexpr bool kUnsignedB = kUnsigned;
  static HWY_INLINE v128_t Dot(v128_t a, v128_t b, v128_t c) {
    const v128_t lo = wasm_i32x4_dot_i16x8(
        wasm_i16x8_extend_low_i8x16(a),
        kUnsigned ? wasm_u16x8_extend_low_u8x16(b) : wasm_i16x8_extend_low_i8x16(b));
    const v128_t hi = wasm_i32x4_dot_i16x8(
        wasm_i16x8_extend_high_i8x16(a),
        kUnsigned ? wasm_u16x8_extend_high_u8x16(b) : wasm_i16x8_extend_high_i8x16(b));
    return wasm_i32x4_add(c, wasm_i32x4_add(wasm_i32x4_shuffle(lo, hi, 0, 2, 4, 6),
                                            wasm_i32x4_shuffle(lo, hi, 1, 3, 5, 7)));
  }
};

// Plain SIMD128's i32x4.dot_i16x8_s with the tokens in the lanes (Int8PrefillTokensPairs): the
// activations pre-widened to int16 once per product (Int8Activations::q16_by_pair), each row's
// weights once per product (WeightPairs), so a pair of columns of 4 tokens is one dot against the
// row's 2 weights splat, with nothing widened, no offset and no horizontal sum per block: the
// widened path's arithmetic in fewer instructions, and exact on every engine.
struct PairDot {
  static constexpr DotKind kKind = DotKind::kPairs;
};

// Which exact dot, if any, this engine's relaxed instruction is: its results against ExactDot's
// for inputs where the lowerings differ (b's bytes 128 and over; a at 127 and -128, where
// pmaddubsw's int16 pair sums saturate and, with a and b both -128, ARM's smull + addp without
// sdot wrap), read from memory so that no compiler folds the instruction with semantics of its
// own.
HWY_NOINLINE DotKind RelaxedDotProbe() {
  if (!gpt2_wasm_relaxed()) return DotKind::kWidened;
  static volatile int8_t a_bytes[2][16] = {
      {127, 127, 127, 127, -128, -128, -128, -128, 127, -128, 1, -1, 100, -100, 50, -7},
      {-128, -128, -128, -128, 5, -6, 7, -8, 126, -127, 64, -64, 33, -33, 2, -2}};
  static volatile uint8_t b_bytes[2][16] = {
      {255, 255, 255, 255, 255, 255, 255, 255, 128, 128, 200, 3, 127, 129, 0, 254},
      {128, 128, 128, 128, 1, 2, 3, 4, 250, 251, 252, 253, 127, 126, 125, 124}};
  static volatile int32_t c_lanes[4] = {1, -2, 3, -4};
  const auto load = [](const volatile auto* p) {  // 16 bytes
    alignas(16) uint8_t bytes[16];
    for (size_t i = 0; i < 16; ++i) bytes[i] = reinterpret_cast<const volatile uint8_t*>(p)[i];
    return wasm_v128_load(bytes);
  };
  bool unsigned_b = true, signed_b = true;
  for (int i = 0; i < 2; ++i) {
    const v128_t a = load(a_bytes[i]), b = load(b_bytes[i]), c = load(c_lanes);
    const v128_t got = RelaxedDot<true>::Dot(a, b, c);
    const v128_t as_unsigned = ExactDot<true>::Dot(a, b, c);
    const v128_t as_signed = ExactDot<false>::Dot(a, b, c);
    unsigned_b = unsigned_b && wasm_i32x4_all_true(wasm_i32x4_eq(got, as_unsigned));
    signed_b = signed_b && wasm_i32x4_all_true(wasm_i32x4_eq(got, as_signed));
  }
  if (unsigned_b) return DotKind::kRelaxedUnsignedB;
  return signed_b ? DotKind::kRelaxedSignedB : DotKind::kWidened;
}

// A row's weights as the b bytes above, 32 per block in column order, into out: Q8_0 quants with
// the sign bit flipped (q + 128) where b reads unsigned, as they are where it reads signed; Q4_0's
// raw nibbles (q + 8) either way. Written once per row and product, then read once per pass of
// tokens as 4-byte splats; and the o the bytes add to each weight, taken back as -o sum_i qx.
template <bool kUnsignedB>
HWY_INLINE void WeightBytes(const BlockQ8_0* HWY_RESTRICT row, int64_t nb,
                            uint8_t* HWY_RESTRICT out) {
  for (int64_t b = 0; b < nb; ++b) {
    v128_t lo = wasm_v128_load(row[b].qs), hi = wasm_v128_load(row[b].qs + 16);
    if (kUnsignedB) {
      lo = wasm_v128_xor(lo, wasm_i8x16_splat(-128));
      hi = wasm_v128_xor(hi, wasm_i8x16_splat(-128));
    }
    wasm_v128_store(out + b * 32, lo);
    wasm_v128_store(out + b * 32 + 16, hi);
  }
}
template <bool kUnsignedB>
HWY_INLINE void WeightBytes(const BlockQ4_0* HWY_RESTRICT row, int64_t nb,
                            uint8_t* HWY_RESTRICT out) {
  for (int64_t b = 0; b < nb; ++b) {
    const v128_t bytes = wasm_v128_load(row[b].qs);
    wasm_v128_store(out + b * 32, wasm_v128_and(bytes, wasm_i8x16_splat(0x0f)));
    wasm_v128_store(out + b * 32 + 16, wasm_u8x16_shr(bytes, 4));
  }
}
template <typename Block, bool kUnsignedB>
constexpr int32_t WeightByteOffset() {
  return std::is_same_v<Block, BlockQ4_0> ? 8 : kUnsignedB ? 128 : 0;
}

// Int8PrefillTokens (below) with 4-byte dots: the same tiles and the same bits, with each dot's
// lanes the 4 tokens of a group rather than 4 parts of one token's block. Per block and 4
// columns: one vector of the 4 tokens' bytes (q8_by_block's interleaved layout), loaded once for
// all kRows rows, against each row's 4 weight bytes splat across the lanes (wbytes[i]), loaded
// once for all kGroups groups; 8 such dots give the 4 tokens' block dots with no horizontal sum,
// started from -o sum_i qx. Then as Int8PrefillTokens: converted, scaled by dx * dw, accumulated.
template <size_t kRows, size_t kGroups, typename Block, typename Dots>
HWY_INLINE void Int8PrefillTokensBytes(const Int8Activations& a,
                                       const int8_t* HWY_RESTRICT q8_by_block, int64_t t0,
                                       int64_t cols, const uint8_t* HWY_RESTRICT const* wbytes,
                                       const float* HWY_RESTRICT const* dws,
                                       VF (&acc)[kRows][kGroups]) {
  const DF df;
  const int64_t nb = cols / 32, T = a.T;
  const float* HWY_RESTRICT dx = a.d_by_block.data() + t0;
  const int32_t* HWY_RESTRICT sums = a.sum_by_block.data() + t0;
  constexpr int32_t kOffset = WeightByteOffset<Block, Dots::kUnsignedB>();
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t g = 0; g < kGroups; ++g) acc[i][g] = hn::Zero(df);
  }
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* HWY_RESTRICT qb = q8_by_block + a.Q8Offset(b, t0);
    v128_t dots[kRows][kGroups];
    for (size_t g = 0; g < kGroups; ++g) {
      v128_t start = wasm_i32x4_splat(0);
      if (kOffset != 0) {
        start = wasm_i32x4_mul(wasm_v128_load(sums + b * T + static_cast<int64_t>(4 * g)),
                               wasm_i32x4_splat(-kOffset));
      }
      for (size_t i = 0; i < kRows; ++i) dots[i][g] = start;
    }
    for (size_t c = 0; c < 8; ++c) {
      v128_t q[kGroups];
      for (size_t g = 0; g < kGroups; ++g) q[g] = wasm_v128_load(qb + g * 128 + c * 16);
      for (size_t i = 0; i < kRows; ++i) {
        const v128_t w = wasm_v128_load32_splat(wbytes[i] + b * 32 + static_cast<int64_t>(c * 4));
        for (size_t g = 0; g < kGroups; ++g) dots[i][g] = Dots::Dot(q[g], w, dots[i][g]);
      }
    }
    for (size_t g = 0; g < kGroups; ++g) {
      const VF dxg = hn::LoadU(df, dx + b * T + static_cast<int64_t>(4 * g));
      for (size_t i = 0; i < kRows; ++i) {
        const VF scale = hn::Mul(dxg, hn::Set(df, dws[i][b]));
        acc[i][g] =
            hn::Add(hn::Mul(hn::ConvertTo(df, hn::Vec<DI32>{dots[i][g]}), scale), acc[i][g]);
      }
    }
  }
}

// A row's weights as signed int16, 32 per block in column order, into out (PairDot): Q8_0's
// quants, Q4_0's nibbles less 8, widened as the widened path widens them (BlockToI16).
template <typename Block>
HWY_INLINE void WeightPairs(const Block* HWY_RESTRICT row, int64_t nb, int16_t* HWY_RESTRICT out) {
  const DI16 di16;
  const VI16 offset = hn::Set(di16, std::is_same_v<Block, BlockQ4_0> ? 8 : 0);
  for (int64_t b = 0; b < nb; ++b) {
    VI16 w[kI16Vecs];
    BlockToI16(row + b, w);
    for (size_t j = 0; j < kI16Vecs; ++j) {
      hn::StoreU(hn::Sub(w[j], offset), di16, out + b * 32 + static_cast<int64_t>(j * kI16Lanes));
    }
  }
}

// Int8PrefillTokensBytes with PairDot: per block and 2 columns, one vector of the 4 tokens'
// int16 pairs (q16_by_pair), loaded once for all kRows rows, against each row's 2 weights splat
// (w16[i]), loaded once for all kGroups groups; 16 such dots give the 4 tokens' block dots. Then
// converted, scaled by dx * dw and accumulated, as the other paths.
template <size_t kRows, size_t kGroups>
HWY_INLINE void Int8PrefillTokensPairs(const Int8Activations& a,
                                       const int16_t* HWY_RESTRICT q16_by_pair, int64_t t0,
                                       int64_t cols, const int16_t* HWY_RESTRICT const* w16,
                                       const float* HWY_RESTRICT const* dws,
                                       VF (&acc)[kRows][kGroups]) {
  const DF df;
  const int64_t nb = cols / 32, T = a.T;
  const float* HWY_RESTRICT dx = a.d_by_block.data() + t0;
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t g = 0; g < kGroups; ++g) acc[i][g] = hn::Zero(df);
  }
  for (int64_t b = 0; b < nb; ++b) {
    const int16_t* HWY_RESTRICT qb = q16_by_pair + a.Q16Offset(b, t0);
    v128_t dots[kRows][kGroups];
    for (size_t i = 0; i < kRows; ++i) {
      for (size_t g = 0; g < kGroups; ++g) dots[i][g] = wasm_i32x4_splat(0);
    }
    for (size_t c = 0; c < 16; ++c) {
      v128_t q[kGroups];
      for (size_t g = 0; g < kGroups; ++g) q[g] = wasm_v128_load(qb + g * 128 + c * 8);
      for (size_t i = 0; i < kRows; ++i) {
        const v128_t w = wasm_v128_load32_splat(w16[i] + b * 32 + static_cast<int64_t>(c * 2));
        for (size_t g = 0; g < kGroups; ++g) {
          dots[i][g] = wasm_i32x4_add(dots[i][g], wasm_i32x4_dot_i16x8(q[g], w));
        }
      }
    }
    for (size_t g = 0; g < kGroups; ++g) {
      const VF dxg = hn::LoadU(df, dx + b * T + static_cast<int64_t>(4 * g));
      for (size_t i = 0; i < kRows; ++i) {
        const VF scale = hn::Mul(dxg, hn::Set(df, dws[i][b]));
        acc[i][g] =
            hn::Add(hn::Mul(hn::ConvertTo(df, hn::Vec<DI32>{dots[i][g]}), scale), acc[i][g]);
      }
    }
  }
}

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
template <size_t kRows, size_t kGroups, typename Block, typename Dots>
HWY_INLINE void Int8PrefillRowGroup(const float* x, const Int8Activations& a,
                                    const int16_t* HWY_RESTRICT q_by_block,
                                    const int8_t* HWY_RESTRICT q8_by_block,
                                    const int16_t* HWY_RESTRICT q16_by_pair, const WeightView& w,
                                    const float* HWY_RESTRICT bias, float* HWY_RESTRICT y,
                                    int64_t r, float* HWY_RESTRICT dw_scratch,
                                    uint8_t* HWY_RESTRICT wbytes_scratch,
                                    int16_t* HWY_RESTRICT w16_scratch) {
  constexpr bool kPairs = std::is_same_v<Dots, PairDot>;
  const DF df;
  const int64_t nb = w.cols / 32, T = a.T;
  const Block* HWY_RESTRICT rows[kRows];
  const float* HWY_RESTRICT dws[kRows];
  const uint8_t* HWY_RESTRICT wbytes[kRows];
  const int16_t* HWY_RESTRICT w16[kRows];
  for (size_t i = 0; i < kRows; ++i) {
    rows[i] = static_cast<const Block*>(w.data) + (r + static_cast<int64_t>(i)) * nb;
    float* dw = dw_scratch + static_cast<int64_t>(i) * nb;
    for (int64_t b = 0; b < nb; ++b) dw[b] = kernels_internal::HalfToFloat(rows[i][b].d);
    dws[i] = dw;
    if constexpr (kPairs) {
      int16_t* pairs = w16_scratch + static_cast<int64_t>(i) * nb * 32;
      WeightPairs(rows[i], nb, pairs);
      w16[i] = pairs;
    } else if constexpr (!std::is_void_v<Dots>) {
      uint8_t* bytes = wbytes_scratch + static_cast<int64_t>(i) * nb * 32;
      WeightBytes<Dots::kUnsignedB>(rows[i], nb, bytes);
      wbytes[i] = bytes;
    }
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
  const auto tokens = [&](auto& acc) {
    constexpr size_t kG = std::extent_v<std::remove_reference_t<decltype(acc[0])>>;
    if constexpr (std::is_void_v<Dots>) {
      Int8PrefillTokens<kRows, kG>(a, q_by_block, t0, w.cols, rows, dws, acc);
    } else if constexpr (kPairs) {
      Int8PrefillTokensPairs<kRows, kG>(a, q16_by_pair, t0, w.cols, w16, dws, acc);
    } else {
      Int8PrefillTokensBytes<kRows, kG, Block, Dots>(a, q8_by_block, t0, w.cols, wbytes, dws, acc);
    }
  };
  for (; t0 + 4 * static_cast<int64_t>(kGroups) <= T; t0 += 4 * kGroups) {
    VF acc[kRows][kGroups];
    tokens(acc);
    store(acc, kGroups);
  }
  for (; t0 + 4 <= T; t0 += 4) {
    VF acc[kRows][1];
    tokens(acc);
    store(acc, 1);
  }
  for (size_t i = 0; i < kRows; ++i) {
    const int64_t row = r + static_cast<int64_t>(i);
    switch (T - t0) {
      case 3:
        RunTile<1, 3>(x, &a, t0, w, bias, y, row);
        break;
      case 2:
        RunTile<1, 2>(x, &a, t0, w, bias, y, row);
        break;
      case 1:
        RunTile<1, 1>(x, &a, t0, w, bias, y, row);
        break;
      default:
        break;
    }
  }
}

// Rows [r0, r1) of an int8-activation prefill on WASM, kPrefillRowsWasm rows at a time, then the
// last row alone, multiplied as Dots says (void: widened to int16).
template <typename Block, typename Dots>
HWY_NOINLINE void Int8PrefillRowsWith(const float* x, const Int8Activations& a, const WeightView& w,
                                      const float* HWY_RESTRICT bias, float* HWY_RESTRICT y,
                                      int64_t r0, int64_t r1) {
  constexpr bool kPairs = std::is_same_v<Dots, PairDot>;
  constexpr bool kBytes = !std::is_void_v<Dots> && !kPairs;
  constexpr size_t kRows = kPairs ? kPairPrefillRows : kBytes ? kBytePrefillRows : kPrefillRowsWasm;
  constexpr size_t kGroups = kPairs   ? kPairPrefillGroups
                             : kBytes ? kBytePrefillGroups
                                      : kPrefillGroups;
  const int64_t nb = w.cols / 32;
  static thread_local std::vector<float> dws;
  static thread_local std::vector<uint8_t> wbytes;
  static thread_local std::vector<int16_t> w16;
  if (dws.size() < static_cast<size_t>(kRows * nb)) dws.resize(static_cast<size_t>(kRows * nb));
  if (kBytes && wbytes.size() < static_cast<size_t>(kRows * nb * 32)) {
    wbytes.resize(static_cast<size_t>(kRows * nb * 32));
  }
  if (kPairs && w16.size() < static_cast<size_t>(kRows * nb * 32)) {
    w16.resize(static_cast<size_t>(kRows * nb * 32));
  }
  // Written once per product by QuantizeActivations (Int8Activations::q_by_block, q8_by_block,
  // q16_by_pair).
  const int16_t* q_by_block = kernels_internal::FirstOnCacheLine(a.q_by_block.data());
  const int8_t* q8_by_block = kernels_internal::FirstOnCacheLine(a.q8_by_block.data());
  const int16_t* q16_by_pair = kernels_internal::FirstOnCacheLine(a.q16_by_pair.data());
  int64_t r = r0;
  for (; r + static_cast<int64_t>(kRows) <= r1; r += kRows) {
    Int8PrefillRowGroup<kRows, kGroups, Block, Dots>(x, a, q_by_block, q8_by_block, q16_by_pair, w,
                                                     bias, y, r, dws.data(), wbytes.data(),
                                                     w16.data());
  }
  for (; r < r1; ++r) {
    Int8PrefillRowGroup<1, kGroups, Block, Dots>(x, a, q_by_block, q8_by_block, q16_by_pair, w,
                                                 bias, y, r, dws.data(), wbytes.data(), w16.data());
  }
}

template <typename Block>
HWY_NOINLINE void Int8PrefillRows(const float* x, const Int8Activations& a, const WeightView& w,
                                  const float* HWY_RESTRICT bias, float* HWY_RESTRICT y, int64_t r0,
                                  int64_t r1) {
  switch (static_cast<DotKind>(a.wasm_dot)) {  // StartMatMulInputKernel's choice
    case DotKind::kWidened:
      return Int8PrefillRowsWith<Block, void>(x, a, w, bias, y, r0, r1);
    case DotKind::kRelaxedUnsignedB:
      return Int8PrefillRowsWith<Block, RelaxedDot<true>>(x, a, w, bias, y, r0, r1);
    case DotKind::kRelaxedSignedB:
      return Int8PrefillRowsWith<Block, RelaxedDot<false>>(x, a, w, bias, y, r0, r1);
    case DotKind::kExactUnsignedB:
      return Int8PrefillRowsWith<Block, ExactDot<true>>(x, a, w, bias, y, r0, r1);
    case DotKind::kExactSignedB:
      return Int8PrefillRowsWith<Block, ExactDot<false>>(x, a, w, bias, y, r0, r1);
    case DotKind::kPairs:
      return Int8PrefillRowsWith<Block, PairDot>(x, a, w, bias, y, r0, r1);
  }
}

// Whether Dots' own prefill code (its Int8PrefillRowsWith) gives the widened path's bits on a
// small product: 2 rows x 9 tokens (a pass of 8 and a last token) x 4 blocks, whose Q8_0 bytes
// take all 256 values, and Q4_0. RelaxedDotProbe checks the instruction; this checks the
// compiled kernel, since an engine can get one right and not the other: Node 20's V8 (relaxed
// SIMD behind a flag) sums twice in its baseline compiler and right once optimized.
template <typename Dots>
HWY_NOINLINE bool SameBitsAsWidened() {
  constexpr int64_t kRows = 2, kCols = 128, kT = 9, kBlocks = kRows * kCols / 32;
  std::vector<float> x(kT * kCols);
  for (int64_t i = 0; i < kT * kCols; ++i) x[i] = static_cast<float>(i * 37 % 255 - 127) / 64;
  BlockQ8_0 q8[kBlocks];
  BlockQ4_0 q4[kBlocks];
  for (int64_t b = 0; b < kBlocks; ++b) {
    q8[b].d = q4[b].d = 0x3c00;  // 1.0
    for (int64_t j = 0; j < 32; ++j) q8[b].qs[j] = static_cast<int8_t>(((b * 32 + j) * 73) & 255);
    for (int64_t j = 0; j < 16; ++j) q4[b].qs[j] = static_cast<uint8_t>(((b * 16 + j) * 29) & 255);
  }
  const auto same = [&](const auto* blocks, TensorType type) {
    using Block = std::remove_const_t<std::remove_pointer_t<decltype(blocks)>>;
    const bool q4_offset = type == TensorType::kQ4_0;
    const WeightView w{type, blocks, kRows, kCols};
    Int8Activations widened, bytes;
    bytes.wasm_dot = static_cast<int>(Dots::kKind);  // its own layout of the quants
    for (Int8Activations* a : {&widened, &bytes}) {
      SizeActivations(kT, kCols, q4_offset, *a);
      QuantizeActivations(x.data(), 0, kT, kCols, q4_offset, *a);
    }
    float want[kT * kRows], got[kT * kRows];
    Int8PrefillRowsWith<Block, void>(x.data(), widened, w, nullptr, want, 0, kRows);
    Int8PrefillRowsWith<Block, Dots>(x.data(), bytes, w, nullptr, got, 0, kRows);
    return std::memcmp(want, got, sizeof(got)) == 0;
  };
  return same(q8, TensorType::kQ8_0) && same(q4, TensorType::kQ4_0);
}

HWY_INLINE bool SameBitsAsWidened(DotKind kind) {
  switch (kind) {
    case DotKind::kWidened:
      return true;
    case DotKind::kRelaxedUnsignedB:
      return SameBitsAsWidened<RelaxedDot<true>>();
    case DotKind::kRelaxedSignedB:
      return SameBitsAsWidened<RelaxedDot<false>>();
    case DotKind::kExactUnsignedB:
      return SameBitsAsWidened<ExactDot<true>>();
    case DotKind::kExactSignedB:
      return SameBitsAsWidened<ExactDot<false>>();
    case DotKind::kPairs:
      return SameBitsAsWidened<PairDot>();
  }
  return false;
}

// `path` resolved: kAuto to the probe's finding; a 4-byte path only once its kernel has given the
// widened path's bits (SameBitsAsWidened), else the widened path.
HWY_INLINE DotKind ResolveDotKind(Int8DotPath path) {
  DotKind kind = DotKind::kWidened;
  switch (path) {
    case Int8DotPath::kWidened:
      return DotKind::kWidened;
    case Int8DotPath::kEmulatedUnsignedB:
      kind = DotKind::kExactUnsignedB;
      break;
    case Int8DotPath::kEmulatedSignedB:
      kind = DotKind::kExactSignedB;
      break;
    case Int8DotPath::kPairs:
      kind = DotKind::kPairs;
      break;
    case Int8DotPath::kAuto: {
      // Probed once per module; threads that race here all find the same.
      static std::atomic<int> probed{-1};
      int probe = probed.load(std::memory_order_relaxed);
      if (probe < 0) {
        probe = static_cast<int>(RelaxedDotProbe());
        probed.store(probe, std::memory_order_relaxed);
      }
      kind = static_cast<DotKind>(probe);
      if (kind == DotKind::kWidened) kind = DotKind::kPairs;
      break;
    }
  }
  static std::atomic<int> checked[6] = {{-1}, {-1}, {-1}, {-1}, {-1}, {-1}};
  std::atomic<int>& check = checked[static_cast<int>(kind)];
  int same = check.load(std::memory_order_relaxed);
  if (same < 0) {
    same = SameBitsAsWidened(kind) ? 1 : 0;
    check.store(same, std::memory_order_relaxed);
  }
  return same ? kind : DotKind::kWidened;
}

// What a product multiplies with: kernels.h ForceInt8DotPath's setting, resolved.
HWY_INLINE DotKind Int8DotKind() {
  return ResolveDotKind(static_cast<Int8DotPath>(
      kernels_internal::forced_int8_dot_path.load(std::memory_order_relaxed)));
}

}  // namespace matmul
}  // namespace HWY_NAMESPACE
}  // namespace gpt2
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET == HWY_WASM

#endif  // GPT2_KERNELS_MATMUL_WASM_INL_H_
