// Helpers shared by the kernel dispatch code (kernels.cc) and the scalar twins (reference.cc).
// Not part of the kernels' interface.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/kernels.h"

namespace gpt2 {
namespace kernels_internal {

// Half precision bits to float, the classic "magic multiply" conversion: shifting the 15
// magnitude bits into place gives a float whose exponent is 112 too small (normals) or a float
// denormal (half subnormals); multiplying by 2^112 fixes both with one rounding-free multiply.
// Infinities and NaNs (exponent 31) are rebuilt explicitly. Kept private to the kernels so they
// do not depend on format/f16.cc; the tests check it against an independent formulation.
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t magnitude = static_cast<uint32_t>(h & 0x7fffu) << 13;
  float f;
  if ((h & 0x7c00u) == 0x7c00u) {
    magnitude = 0x7f800000u | magnitude;  // inf or NaN, payload kept
    const uint32_t bits = sign | magnitude;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
  std::memcpy(&f, &magnitude, sizeof(f));
  f *= 5.192296858534828e+33f;  // 2^112
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  bits |= sign;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Block geometry of the weight types, private copy of format/tensor_type.h's TypeBlockSize so
// the kernels link without the format layer.
inline int64_t BlockElems(TensorType type) {
  return (type == TensorType::kQ8_0 || type == TensorType::kQ4_0) ? 32 : 1;
}

// Throws gpt2::Error unless the arguments describe a valid product (see kernels.h MatMul).
// Called once per MatMul, outside the hot loops.
void CheckMatMulArgs(const float* x, int64_t T, const WeightView& w, const float* y,
                     int64_t row_begin, int64_t row_end);

}  // namespace kernels_internal
}  // namespace gpt2
