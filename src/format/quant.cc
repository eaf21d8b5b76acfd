// Reference Q8_0 / Q4_0 quantization, following ggml-quants.c quantize_row_q8_0_ref,
// quantize_row_q4_0_ref, dequantize_row_q8_0 and dequantize_row_q4_0 operation for operation, so
// that a file we write is byte-identical to one llama.cpp's quantizer would write from the same
// f32 weights (the scale is computed in f32 and its f32 reciprocal is used for the quants; only
// the stored scale is rounded to f16).
#include "format/quant.h"

#include <cmath>
#include <cstring>
#include <string>

#include "base/error.h"
#include "format/f16.h"

namespace gpt2 {
namespace {

// ggml converts the rounded float straight to int8_t; for finite inputs the value is in
// [-127, 127]. A NaN weight would make that conversion undefined, so it is mapped to 0 here
// (finite inputs are unaffected, keeping bit-exactness with ggml).
inline int8_t RoundToInt8(float v) {
  // ggml's roundf (halves away from zero), computed without calling it: roundf is a libcall in
  // WebAssembly, while trunc is one instruction (f32.trunc, roundss), and this runs on every
  // activation of every int8-activation MatMul. Exact for every float: v - trunc(v) is exact
  // (Sterbenz for |v| >= 1, trunc(v) = 0 below), so the tie test is too; trunc(v) +- 1 is exact
  // below 2^24 and the fraction is 0 above 2^23. inf gives inf - inf = NaN, not >= 0.5: r = inf,
  // as roundf; NaN stays NaN.
  float r = std::trunc(v);
  if (std::fabs(v - r) >= 0.5f) r += std::copysign(1.0f, v);
  if (!(r == r)) return 0;
  if (r > 127.0f) return 127;
  if (r < -128.0f) return -128;
  return static_cast<int8_t>(r);
}

// ggml: MIN(15, (int8_t)(x + 8.5f)) - truncation toward zero of a value that is >= 0 for
// finite inputs. Out-of-range (NaN) values are clamped instead of being undefined behaviour.
inline uint8_t Q4Nibble(float scaled) {
  const float t = scaled + 8.5f;
  if (!(t >= 0.0f)) return 0;  // also NaN
  if (t >= 15.0f) return 15;
  return static_cast<uint8_t>(static_cast<int8_t>(t));
}

}  // namespace

void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n) {  // x: [n], y: [n / 32]
  const int64_t nb = n / kQK8_0;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK8_0;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) {
      const float a = std::fabs(xb[j]);
      amax = amax > a ? amax : a;  // ggml's MAX(amax, fabsf(v))
    }
    const float d = amax / 127.0f;  // (1 << 7) - 1
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = F32ToF16(d);
    for (int j = 0; j < kQK8_0; ++j) y[i].qs[j] = RoundToInt8(xb[j] * id);
  }
}

void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, int64_t n) {  // x: [n / 32], y: [n]
  const int64_t nb = n / kQK8_0;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(x[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[i * kQK8_0 + j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, int64_t n) {  // x: [n], y: [n / 32]
  const int64_t nb = n / kQK4_0;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK4_0;
    // The signed value of largest magnitude (first one wins on ties), so that it maps to -8
    // exactly and the opposite sign gets the extra level +7.
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kQK4_0; ++j) {
      if (amax < std::fabs(xb[j])) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = F32ToF16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const uint8_t lo = Q4Nibble(xb[j] * id);
      const uint8_t hi = Q4Nibble(xb[j + kQK4_0 / 2] * id);
      y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, int64_t n) {  // x: [n / 32], y: [n]
  const int64_t nb = n / kQK4_0;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(x[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int lo = (x[i].qs[j] & 0x0f) - 8;
      const int hi = (x[i].qs[j] >> 4) - 8;
      y[i * kQK4_0 + j] = static_cast<float>(lo) * d;
      y[i * kQK4_0 + j + kQK4_0 / 2] = static_cast<float>(hi) * d;
    }
  }
}

void DequantizeRow(TensorType type, const void* row, float* out, int64_t n) {
  switch (type) {
    case TensorType::kF32:
      std::memcpy(out, row, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::kF16: {
      // The row may sit at any byte offset of a mapped file: read each half with memcpy.
      const uint8_t* bytes = static_cast<const uint8_t*>(row);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, sizeof(h));
        out[i] = F16ToF32(h);
      }
      return;
    }
    case TensorType::kQ8_0:
      DequantizeRowQ8_0(static_cast<const BlockQ8_0*>(row), out, n);
      return;
    case TensorType::kQ4_0:
      DequantizeRowQ4_0(static_cast<const BlockQ4_0*>(row), out, n);
      return;
  }
  throw Error("DequantizeRow: unsupported tensor type id " +
              std::to_string(static_cast<uint32_t>(type)) + " (" +
              GgmlTypeName(static_cast<uint32_t>(type)) + ")");
}

}  // namespace gpt2
