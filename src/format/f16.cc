// IEEE 754 binary16 <-> binary32, bit by bit. Bit casts go through memcpy (no std::bit_cast in
// Emscripten 3.1.6's libc++). F32ToF16 rounds to nearest, ties to even, which is what the F16C
// instruction (_cvtss_sh with _MM_FROUND_TO_NEAREST_INT) used by ggml's GGML_FP32_TO_FP16 and
// numpy's float32.astype(float16) both do.
#include "format/f16.h"

#include <cstring>

namespace gpt2 {
namespace {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Rounds `value >> shift` to nearest, ties to even (shift in 1..31).
inline uint32_t ShiftRightRoundEven(uint32_t value, int shift) {
  const uint32_t result = value >> shift;
  const uint32_t rem = value & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (result & 1u))) return result + 1;
  return result;
}

}  // namespace

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in binary32.
    const float magnitude = static_cast<float>(mant) * BitsFloat(0x33800000u);  // 2^-24
    return BitsFloat(sign | FloatBits(magnitude));
  }
  if (exp == 31) {
    // Inf keeps mant 0; NaN keeps its payload in the top mantissa bits.
    return BitsFloat(sign | 0x7f800000u | (mant << 13));
  }
  // Normal: rebias the exponent from 15 to 127.
  return BitsFloat(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

uint16_t F32ToF16(float f) {
  const uint32_t x = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;

  if (abs > 0x7f800000u) {
    // NaN: keep the top payload bits and force the quiet bit, so a NaN never becomes inf.
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  if (abs >= 0x47800000u) {
    // |f| >= 2^16 (or inf): beyond the largest half (65504) even before rounding.
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  const int exp = static_cast<int>(abs >> 23) - 127;  // unbiased binary32 exponent
  if (exp >= -14) {
    // Normal half. Rounding may carry into the exponent; a carry out of 65504's exponent gives
    // exactly 0x7c00 (inf), as IEEE requires for values >= 65520.
    const uint32_t biased = (static_cast<uint32_t>(exp + 15) << 10) | ((abs & 0x7fffffu) >> 13);
    const uint32_t rem = abs & 0x1fffu;
    uint32_t result = biased;
    if (rem > 0x1000u || (rem == 0x1000u && (biased & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  // Subnormal half (or zero): value = m * 2^(exp-23) with the implicit bit; in units of the
  // half subnormal quantum 2^-24 that is m >> -(exp+1).
  const int shift = -(exp + 1);  // >= 14
  if (shift > 24) return sign;   // below half of 2^-24: rounds to zero (also binary32 subnormals)
  const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
  return static_cast<uint16_t>(sign | ShiftRightRoundEven(m, shift));
}

}  // namespace gpt2
