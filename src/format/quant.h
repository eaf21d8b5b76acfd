// ggml's Q8_0 and Q4_0 blocks, byte for byte (ggml-common.h), and the portable reference
// quantize/dequantize that define them. The SIMD matmul kernels read these structs directly.
//
// Q8_0: 32 weights = f16 scale d + 32 int8 q;      w[i] = d * q[i]
//       d = max|x| / 127, q = round(x / d)                    (ggml quantize_row_q8_0_ref)
// Q4_0: 32 weights = f16 scale d + 16 bytes of nibbles; w[i] = d * (nibble[i] - 8)
//       nibble[i] for i < 16 is the low half of qs[i], for i >= 16 the high half of qs[i-16].
//       d = max / -8 where max is the signed value of largest magnitude,
//       nibble = min(15, (int8)(x / d + 8.5))                  (ggml quantize_row_q4_0_ref)
#pragma once

#include <cstdint>

#include "format/tensor_type.h"

namespace gpt2 {

constexpr int kQK8_0 = 32;
struct BlockQ8_0 {
  uint16_t d;         // f16 scale
  int8_t qs[kQK8_0];  // quants
};
static_assert(sizeof(BlockQ8_0) == 2 + kQK8_0, "Q8_0 block must match ggml (34 bytes)");

constexpr int kQK4_0 = 32;
struct BlockQ4_0 {
  uint16_t d;              // f16 scale
  uint8_t qs[kQK4_0 / 2];  // nibbles
};
static_assert(sizeof(BlockQ4_0) == 2 + kQK4_0 / 2, "Q4_0 block must match ggml (18 bytes)");

// n must be a multiple of 32.
void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n);
void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, int64_t n);
void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, int64_t n);
void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, int64_t n);

// Any supported type to f32 (F32 copies, F16 converts), n a multiple of the block size.
// Used for embedding lookups and by tests.
void DequantizeRow(TensorType type, const void* row, float* out, int64_t n);

}  // namespace gpt2
