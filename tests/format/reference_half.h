// An independent, deliberately naive binary16 codec for the format tests: values are decoded
// with the textbook formula in double precision, and encoding searches the ordered list of
// finite halves for the nearest one (ties to the even bit pattern), as IEEE 754 defines
// roundTiesToEven. Slow, but it shares no code or bit tricks with src/format/f16.cc.
#pragma once

#include <cmath>
#include <cstdint>

namespace gpt2_test {

// (-1)^s * 2^(e-15) * (1 + m/1024), or 2^-14 * m/1024 for e == 0.
inline double RefHalfToDouble(uint16_t h) {
  const int s = h >> 15;
  const int e = (h >> 10) & 31;
  const int m = h & 1023;
  double v;
  if (e == 0) {
    v = std::ldexp(static_cast<double>(m) / 1024.0, -14);
  } else if (e == 31) {
    v = m == 0 ? INFINITY : NAN;
  } else {
    v = std::ldexp(1.0 + static_cast<double>(m) / 1024.0, e - 15);
  }
  return s ? -v : v;
}

// Nearest half to a finite or infinite float (not NaN), ties to even.
inline uint16_t RefFloatToHalf(float f) {
  const double x = f;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(x);
  // 65504 is the largest half; the next step would be 65536, so the midpoint 65520 and above
  // round to infinity (65520 is a tie and "even" is the infinity pattern 0x7c00).
  if (a >= 65520.0) return sign | 0x7c00;
  // Binary search over the positive finite patterns 0x0000..0x7bff, which sort like their values.
  int lo = 0, hi = 0x7bff;  // find the largest pattern with value <= a
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (RefHalfToDouble(static_cast<uint16_t>(mid)) <= a) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  if (lo == 0x7bff) return sign | 0x7bff;  // between 65504 and 65520
  const double below = RefHalfToDouble(static_cast<uint16_t>(lo));
  const double above = RefHalfToDouble(static_cast<uint16_t>(lo + 1));
  const double d_below = a - below;  // exact: all values involved fit in a double's mantissa
  const double d_above = above - a;
  int pick;
  if (d_below < d_above) {
    pick = lo;
  } else if (d_above < d_below) {
    pick = lo + 1;
  } else {
    pick = (lo % 2 == 0) ? lo : lo + 1;
  }
  return static_cast<uint16_t>(sign | pick);
}

}  // namespace gpt2_test
