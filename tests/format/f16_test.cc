// F16ToF32 / F32ToF16 against known IEEE 754 binary16 bit patterns and against the naive codec
// in reference_half.h.
#include "format/f16.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "reference_half.h"

namespace {

using gpt2::F16ToF32;
using gpt2::F32ToF16;

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

bool IsHalfNan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }

}  // namespace

TEST_CASE("F32ToF16 gives the IEEE bit patterns of exact values", "[format]") {
  CHECK(F32ToF16(0.0f) == 0x0000);
  CHECK(F32ToF16(-0.0f) == 0x8000);
  CHECK(F32ToF16(1.0f) == 0x3c00);
  CHECK(F32ToF16(-2.0f) == 0xc000);
  CHECK(F32ToF16(0.5f) == 0x3800);
  CHECK(F32ToF16(65504.0f) == 0x7bff);                  // largest finite half
  CHECK(F32ToF16(std::ldexp(1.0f, -14)) == 0x0400);     // smallest normal
  CHECK(F32ToF16(std::ldexp(1.0f, -24)) == 0x0001);     // smallest subnormal
  CHECK(F32ToF16(std::ldexp(1023.0f, -24)) == 0x03ff);  // largest subnormal
  CHECK(F32ToF16(-std::ldexp(5.0f, -24)) == 0x8005);
}

TEST_CASE("F32ToF16 rounds to nearest, ties to even", "[format]") {
  // Between 1 (0x3c00) and 1 + 2^-10 (0x3c01): the midpoint goes to the even 0x3c00.
  CHECK(F32ToF16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  // Just above the midpoint goes up.
  CHECK(F32ToF16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)) == 0x3c01);
  // Midpoint between 0x3c01 and 0x3c02 goes to the even 0x3c02.
  CHECK(F32ToF16(1.0f + 3.0f * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(F32ToF16(-(1.0f + 3.0f * std::ldexp(1.0f, -11))) == 0xbc02);
  // 1/3 = 0x3555 (0.333251953125), nearest from below.
  CHECK(F32ToF16(1.0f / 3.0f) == 0x3555);
  // Rounding carries into the exponent: just under 2 becomes 2.
  CHECK(F32ToF16(std::nextafter(2.0f, 0.0f)) == 0x4000);
  // Overflow: 65519.996 stays 65504, 65520 is the tie with "65536" and rounds to infinity.
  CHECK(F32ToF16(std::nextafter(65520.0f, 0.0f)) == 0x7bff);
  CHECK(F32ToF16(65520.0f) == 0x7c00);
  CHECK(F32ToF16(-65520.0f) == 0xfc00);
  CHECK(F32ToF16(1e10f) == 0x7c00);
  CHECK(F32ToF16(std::numeric_limits<float>::max()) == 0x7c00);
}

TEST_CASE("F32ToF16 handles subnormal halves and underflow", "[format]") {
  const float q = std::ldexp(1.0f, -24);  // the subnormal half quantum
  CHECK(F32ToF16(0.5f * q) == 0x0000);    // tie between 0 and q: even is 0
  CHECK(F32ToF16(-0.5f * q) == 0x8000);
  CHECK(F32ToF16(std::nextafter(0.5f * q, 1.0f)) == 0x0001);
  CHECK(F32ToF16(1.5f * q) == 0x0002);  // tie between 1q and 2q: even is 2q
  CHECK(F32ToF16(2.5f * q) == 0x0002);  // tie between 2q and 3q: even is 2q
  CHECK(F32ToF16(0.25f * q) == 0x0000);
  CHECK(F32ToF16(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(F32ToF16(-std::numeric_limits<float>::denorm_min()) == 0x8000);
  // Largest subnormal + half a quantum rounds up into the smallest normal (0x03ff is odd).
  CHECK(F32ToF16(1023.5f * q) == 0x0400);
  CHECK(F32ToF16(1022.5f * q) == 0x03fe);
}

TEST_CASE("F32ToF16 keeps infinities and NaNs", "[format]") {
  CHECK(F32ToF16(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(F32ToF16(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(IsHalfNan(F32ToF16(std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload lives only in the low 13 bits must not turn into infinity.
  CHECK(IsHalfNan(F32ToF16(FromBits(0x7f800001u))));
  CHECK(IsHalfNan(F32ToF16(FromBits(0xff800001u))));
  CHECK((F32ToF16(FromBits(0xff800001u)) & 0x8000) == 0x8000);
}

TEST_CASE("F16ToF32 decodes known bit patterns", "[format]") {
  CHECK(Bits(F16ToF32(0x0000)) == Bits(0.0f));
  CHECK(Bits(F16ToF32(0x8000)) == Bits(-0.0f));
  CHECK(F16ToF32(0x3c00) == 1.0f);
  CHECK(F16ToF32(0xc000) == -2.0f);
  CHECK(F16ToF32(0x3555) == 0.333251953125f);
  CHECK(F16ToF32(0x7bff) == 65504.0f);
  CHECK(F16ToF32(0x0400) == std::ldexp(1.0f, -14));
  CHECK(F16ToF32(0x0001) == std::ldexp(1.0f, -24));
  CHECK(F16ToF32(0x83ff) == -std::ldexp(1023.0f, -24));
  CHECK(F16ToF32(0x7c00) == std::numeric_limits<float>::infinity());
  CHECK(F16ToF32(0xfc00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(F16ToF32(0x7e00)));
  CHECK(std::isnan(F16ToF32(0x7c01)));
}

TEST_CASE("F16ToF32 matches the textbook formula for every half, and round trips", "[format]") {
  int mismatches = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    const float f = F16ToF32(half);
    if (IsHalfNan(half)) {
      if (!std::isnan(f) || !IsHalfNan(F32ToF16(f))) ++mismatches;
      continue;
    }
    const double want = gpt2_test::RefHalfToDouble(half);
    if (static_cast<double>(f) != want || std::signbit(f) != std::signbit(want)) ++mismatches;
    if (F32ToF16(f) != half) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("F32ToF16 matches the naive nearest-half search on random floats", "[format]") {
  std::mt19937 rng(1234);
  int mismatches = 0;
  int checked = 0;
  // Random bit patterns cover every binary32 exponent; scaled normals cover the half range densely.
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_real_distribution<float> exponent(-27.0f, 17.0f);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  for (int k = 0; k < 20000; ++k) {
    float f =
        (k % 2 == 0) ? FromBits(bits(rng)) : std::ldexp(mant(rng), static_cast<int>(exponent(rng)));
    if (k % 4 == 3) f = -f;
    if (std::isnan(f)) continue;
    ++checked;
    if (F32ToF16(f) != gpt2_test::RefFloatToHalf(f)) {
      if (++mismatches <= 5) UNSCOPED_INFO("mismatch at float bits " << Bits(f));
    }
  }
  // Every midpoint between adjacent halves (exact in binary32): ties must go to the even one.
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    const double mid = 0.5 * (gpt2_test::RefHalfToDouble(static_cast<uint16_t>(h)) +
                              gpt2_test::RefHalfToDouble(static_cast<uint16_t>(h + 1)));
    const float f = static_cast<float>(mid);
    REQUIRE(static_cast<double>(f) == mid);
    ++checked;
    const uint16_t want = (h % 2 == 0) ? h : h + 1;
    if (F32ToF16(f) != want || gpt2_test::RefFloatToHalf(f) != want) ++mismatches;
  }
  CHECK(checked > 40000);
  CHECK(mismatches == 0);
}
