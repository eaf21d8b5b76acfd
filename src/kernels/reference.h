// Scalar twins of kernels/kernels.h: plain loops, double accumulators where it keeps them
// simple, no SIMD. They define what each kernel computes; tests compare the Highway kernels
// against them with named tolerances.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace gpt2 {
namespace reference {

void MatMul(const float* x, int64_t T, const WeightView& w, const float* bias, float* y,
            int64_t row_begin, int64_t row_end, QuantActivations act = QuantActivations::kInt8);
void LayerNorm(const float* x, const float* gamma, const float* beta, float eps, int64_t n,
               float* y);
void Gelu(float* x, int64_t n);
void Softmax(float* x, int64_t n);
void AddInPlace(float* y, const float* x, int64_t n);
void AttentionHead(const float* q, const float* k, const float* v, int64_t kv_stride,
                   int64_t n_keys, int64_t head_dim, float scale, float* scores, float* probs,
                   float* out);
void AttentionHead(const float* q, const uint16_t* k, const uint16_t* v, int64_t kv_stride,
                   int64_t n_keys, int64_t head_dim, float scale, float* scores, float* probs,
                   float* out);
void AttentionHead(const float* q, const KvHeadQ8& keys, const KvHeadQ8& values, int64_t n_keys,
                   int64_t head_dim, float scale, float* scores, float* probs, float* out);
void MatMulTransposed(const float* dy, int64_t T, const WeightView& w, float* dx, int64_t col_begin,
                      int64_t col_end);
void GeluBackward(const float* x, const float* dy, float* dx, int64_t n);
void AttentionHeadBackward(const float* q, const float* k, const float* v, int64_t kv_stride,
                           const float* probs, const float* dout, int64_t n_keys, int64_t head_dim,
                           float scale, float* dq, float* dk, float* dv, int64_t dkv_stride,
                           float* dscores);
// format/f16.h's scalar conversions element by element (F32ToF16 after the clamp to +-65504).
void F32ToF16Saturated(const float* x, uint16_t* h, int64_t n);
void F16ToF32(const uint16_t* h, float* x, int64_t n);

}  // namespace reference
}  // namespace gpt2
