// The numeric kernels of a GPT-2 forward pass. They know nothing about GPT-2: only rows,
// vectors and weight blocks. Each function dispatches to the best Highway target the CPU has
// (native) or to the WASM SIMD128 target (browser). Every one has a scalar twin in
// kernels/reference.h with the same signature: the executable specification the tests
// compare against.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/tensor_type.h"

namespace gpt2 {

// A weight matrix in ggml layout: `rows` output features, each a contiguous row of `cols` input
// features encoded as `type` (for Q8_0/Q4_0, cols/32 blocks per row). cols must be a multiple of
// TypeBlockSize(type).
struct WeightView {
  TensorType type = TensorType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

// y[t, r] = bias[r] + sum_c x[t, c] * W[r, c]   for t in [0, T), r in [row_begin, row_end).
// x: [T, cols], y: [T, rows] (row stride `rows`), bias: [rows] or nullptr.
// Equivalent to torch.nn.functional.linear(x, W, bias). The row range lets the caller split
// one product across threads; rows outside it are not touched.
void MatMul(const float* x, int64_t T, const WeightView& w, const float* bias, float* y,
            int64_t row_begin, int64_t row_end);

// y = (x - mean) / sqrt(var + eps) * gamma + beta over n features, var biased (divide by n).
// Equivalent to torch.nn.LayerNorm(n, eps). Returns nothing; y may alias x.
void LayerNorm(const float* x, const float* gamma, const float* beta, float eps, int64_t n,
               float* y);

// In place: x = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Equivalent to torch.nn.functional.gelu(x, approximate="tanh") (GPT-2's "gelu_new").
void Gelu(float* x, int64_t n);

// In place: x = exp(x - max x) / sum exp(x - max x).
void Softmax(float* x, int64_t n);

// y += x.
void AddInPlace(float* y, const float* x, int64_t n);

// One query of one head attending causally to n_keys cached keys.
//   scores[j] = scale * dot(q, k_j),  probs = softmax(scores),  out = sum_j probs[j] v_j
// q: [head_dim]; key j at k + j*kv_stride, value j at v + j*kv_stride; out: [head_dim].
// probs: [n_keys] (written). scores: [n_keys] or nullptr (written before softmax, for the
// activation observer).
void AttentionHead(const float* q, const float* k, const float* v, int64_t kv_stride,
                   int64_t n_keys, int64_t head_dim, float scale, float* scores, float* probs,
                   float* out);

// Highway targets compiled into this binary that the CPU supports (one entry in wasm), and a way
// for tests to pin dispatch to one of them. ForceKernelTarget(0) restores normal dispatch.
std::vector<int64_t> KernelTargets();
std::string KernelTargetName(int64_t target);
void ForceKernelTarget(int64_t target);
// The target the next dispatched call will use, e.g. "AVX2" or "WASM".
std::string ActiveKernelTargetName();

}  // namespace gpt2
