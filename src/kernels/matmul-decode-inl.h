// Per-target weight decoders of MatMul (matmul-inl.h): f32/f16 rows and Q8_0/Q4_0 blocks to f32
// vectors (the float tiles, matmul-float-inl.h) or to int16 vectors (the int8 tiles,
// matmul-int8-inl.h), and the vector types and lane counts every matmul-*-inl.h file shares.
// Included once per Highway target, through matmul-inl.h.
#if defined(GPT2_KERNELS_MATMUL_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GPT2_KERNELS_MATMUL_DECODE_INL_H_
#undef GPT2_KERNELS_MATMUL_DECODE_INL_H_
#else
#define GPT2_KERNELS_MATMUL_DECODE_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "format/quant.h"
#include "kernels/internal.h"

HWY_BEFORE_NAMESPACE();
namespace gpt2 {
namespace HWY_NAMESPACE {
namespace matmul {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Lanes of f32 per vector; a Q block of 32 weights is kBlockVecs vectors. Every target we build
// (x86 up to AVX-512, WASM, EMU128, scalar) has at most 16 f32 lanes.
constexpr size_t kLanes = hn::MaxLanes(DF());
static_assert(kLanes <= 32 && 32 % kLanes == 0, "a Q block must be whole vectors");
constexpr size_t kBlockVecs = 32 / kLanes;
static_assert(kBlockVecs % 2 == 0, "the T == 1 block loop keeps two partial sums");

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
  lo = ShiftedHalvesToF32(
      df, hn::BitCast(hn::RebindToSigned<DF>(), hn::InterleaveLower(du16, hn::Zero(du16), bits)));
  hi = ShiftedHalvesToF32(
      df, hn::BitCast(hn::RebindToSigned<DF>(), hn::InterleaveUpper(du16, hn::Zero(du16), bits)));
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
HWY_INLINE void DecodeBlock(DF df, const BlockQ8_0* HWY_RESTRICT block, VF (&w)[kBlockVecs]) {
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
HWY_INLINE void DecodeBlock(DF df, const BlockQ4_0* HWY_RESTRICT block, VF (&w)[kBlockVecs]) {
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
    const auto bytes =
        hn::BitCast(di32, hn::PromoteTo(hn::RebindToUnsigned<DF>(),
                                        hn::LoadU(du8, block->qs + (high ? first - 16 : first))));
    const auto nibbles = high ? hn::ShiftRight<4>(bytes) : hn::And(bytes, hn::Set(di32, 0x0f));
    w[j] = hn::ConvertTo(df, hn::Sub(nibbles, hn::Set(di32, 8)));
  }
#endif
}

// ---- Weights as int16 (the int8 tiles) -------------------------------------------------------

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
  const hn::Rebind<int8_t, DI16> di8;       // x86: one vpmovsx{bw} from memory per vector
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
  const auto nibbles = hn::Combine(du16, hn::ShiftRight<4>(b), hn::And(b, hn::Set(du16h, 0x0f)));
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

}  // namespace matmul
}  // namespace HWY_NAMESPACE
}  // namespace gpt2
HWY_AFTER_NAMESPACE();

#undef GPT2_MATMUL_FULL_LOADS
#endif  // GPT2_KERNELS_MATMUL_DECODE_INL_H_
