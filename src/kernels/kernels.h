// The numeric kernels of a GPT-2 forward pass. They know nothing about GPT-2: only rows,
// vectors and weight blocks. Each function dispatches to the best Highway target the CPU has
// (native) or to the WASM SIMD128 target (browser). Every one has a scalar twin in
// kernels/reference.h with the same signature: the executable specification the tests
// compare against.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/tensor_type.h"

namespace gpt2 {
class MatMulInput;
namespace kernels_internal {
struct MatMulInputData;
const MatMulInputData& InputData(const MatMulInput& in);
}  // namespace kernels_internal

// A weight matrix in ggml layout: `rows` output features, each a contiguous row of `cols` input
// features encoded as `type` (for Q8_0/Q4_0, cols/32 blocks per row). cols must be a multiple of
// TypeBlockSize(type).
struct WeightView {
  TensorType type = TensorType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

// How MatMul treats the activations x when the weights are Q8_0 or Q4_0 (f32 and f16 weights
// always multiply the f32 activations).
enum class QuantActivations {
  // llama.cpp's CPU path (ggml vec_dot_q8_0_q8_0 / vec_dot_q4_0_q8_0): each token's row of x is
  // first quantized to Q8_0 blocks exactly as format/quant.h QuantizeRowQ8_0 does (ggml
  // quantize_row_q8_0_ref: dx = max|x|/127 stored as f16, qx = round(x * (1/dx))), then each
  // block's dot product is the exact integer sum of qw * qx, scaled in f32 by dw * dx:
  //   y[t, r] = bias[r] + sum_b (dw[r, b] * dx[t, b]) * sum_i qw[r, b, i] * qx[t, b, i]
  // Integer multiply-adds are ~3x fewer SIMD operations than decoding weights to f32.
  kInt8,
  // x stays f32: y[t, r] = bias[r] + sum_c x[t, c] * (dw * qw)[r, c].
  kFloat,
  // Whichever of the two the running target computes faster for this T;
  // FastestQuantActivations(T) says which. Both stay within the weights' quantization error,
  // but a caller that needs the same numbers on every target (the page and the native CLI give
  // the same token ids) must pick one of the two explicitly: kFastest differs between AVX-512
  // and WASM.
  kFastest,
};

// What kFastest means for T tokens on the target the next dispatched call uses: kInt8, except
// for prefill (T > 1) on x86 AVX-512 without VNNI (Highway's AVX3), where the f32 path
// dequantizes each weight row once and then runs 16-lane f32 multiply-adds (FMA) over all
// tokens, about twice as fast as the int8 path's per-block int->float conversion and scale
// broadcast. With VNNI (AVX3_DL) int8 prefill multiplies bytes with vpdpbusd, ~3x the f32
// path (matmul-inl.h).
QuantActivations FastestQuantActivations(int64_t T);

// y[t, r] = bias[r] + sum_c x[t, c] * W[r, c]   for t in [0, T), r in [row_begin, row_end).
// x: [T, cols], y: [T, rows] (row stride `rows`), bias: [rows] or nullptr.
// Equivalent to torch.nn.functional.linear(x, W, bias), up to the activation quantization
// `act` chooses for Q8_0/Q4_0 weights (see QuantActivations). The row range lets the caller split
// one product across threads; rows outside it are not touched. With kInt8 every call quantizes
// x again (into per-thread scratch that grows once, no allocation in a steady token loop): a
// caller splitting one product prepares x once instead (MatMulInput below).
void MatMul(const float* x, int64_t T, const WeightView& w, const float* bias, float* y,
            int64_t row_begin, int64_t row_end, QuantActivations act = QuantActivations::kInt8);

// MatMul works on tiles of a few rows, and a row's rounding can depend on the tile it falls in
// (a wider tile keeps fewer accumulators per row). Tiles start at row_begin and never straddle a
// multiple of kMatMulRowGrain counted from it, so calls over ranges that begin at multiples of
// kMatMulRowGrain give every row the bits of one call over all rows, whatever the split.
constexpr int64_t kMatMulRowGrain = 48;

// The activations x of one product, prepared once for several MatMul calls over row ranges of
// it (one per thread, say): with kInt8 activations and Q8_0/Q4_0 weights x is quantized once
// here, not once per call. Reusable: its buffers only grow.
class MatMulInput {
 public:
  MatMulInput();
  ~MatMulInput();
  MatMulInput(MatMulInput&&) noexcept;
  MatMulInput& operator=(MatMulInput&&) noexcept;
  MatMulInput(const MatMulInput&) = delete;
  MatMulInput& operator=(const MatMulInput&) = delete;

 private:
  friend void StartMatMulInput(const float*, int64_t, const WeightView&, QuantActivations,
                               MatMulInput&);
  friend void PrepareMatMulInputRows(MatMulInput&, int64_t, int64_t);
  friend void MatMul(const MatMulInput&, const WeightView&, const float*, float*, int64_t, int64_t);
  friend const kernels_internal::MatMulInputData& kernels_internal::InputData(const MatMulInput&);
  std::unique_ptr<kernels_internal::MatMulInputData> data_;
};

// Prepares x: [T, w.cols] for MatMul(in, w', ...) with weights w' of w's type and cols. x is
// not copied: it must stay unchanged while `in` is used. Throws gpt2::Error on a bad shape or
// type (as MatMul does).
void PrepareMatMulInput(const float* x, int64_t T, const WeightView& w, QuantActivations act,
                        MatMulInput& in);

// PrepareMatMulInput in two steps, so that its per-token work (quantizing x) can be split over
// threads too: StartMatMulInput takes the arguments and sizes `in`, then
// PrepareMatMulInputRows(in, t_begin, t_end) calls for disjoint token ranges that cover [0, T),
// from any threads at once, complete it. The result is the same bits.
void StartMatMulInput(const float* x, int64_t T, const WeightView& w, QuantActivations act,
                      MatMulInput& in);
void PrepareMatMulInputRows(MatMulInput& in, int64_t t_begin, int64_t t_end);

// MatMul(x, T, w, bias, y, row_begin, row_end, act) with the x, T and act `in` was prepared
// with: the same bits. Reads `in` only, so threads may share one for disjoint row ranges.
// Throws gpt2::Error if w's type or cols differ from the prepared ones, or if dispatch now
// picks another Highway target than the one that prepared `in` (ForceKernelTarget).
void MatMul(const MatMulInput& in, const WeightView& w, const float* bias, float* y,
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
// The same with keys and values stored as IEEE half precision bits (a 16-bit KV cache): the
// result is the f32 call's on the decoded keys and values, to the bit. Keys and values must be
// finite (an infinite or NaN half is read as a finite number).
void AttentionHead(const float* q, const uint16_t* k, const uint16_t* v, int64_t kv_stride,
                   int64_t n_keys, int64_t head_dim, float scale, float* scores, float* probs,
                   float* out);

// ---- Backward (gradients with respect to activations, never weights) -----------------------
// dx[t, c] = sum_o dy[t, o] W[o, c]   for t in [0, T), c in [col_begin, col_end).
// dy: [T, w.rows], dx: [T, w.cols] (row stride w.cols; columns outside the range untouched).
// The gradient of MatMul's x (torch: dy @ W) for every weight type, Q8_0/Q4_0 multiplied as
// their dequantized values d * q (the straight-through gradient: the int8 rounding of x in
// kInt8 has no gradient here). The weights are decoded a block-wide strip of rows at a time,
// never the whole matrix. col_begin must be a multiple of TypeBlockSize(w.type) (32 for Q8_0 and
// Q4_0), and col_end too unless it is w.cols, so that threads can split the columns.
void MatMulTransposed(const float* dy, int64_t T, const WeightView& w, float* dx, int64_t col_begin,
                      int64_t col_end);

// dx[i] = dy[i] * gelu'(x[i]) for Gelu's tanh form (x is Gelu's input). dx may alias dy.
void GeluBackward(const float* x, const float* dy, float* dx, int64_t n);

// The backward of one AttentionHead query (f32 keys and values), given its forward probs
// [n_keys] and the gradient dout [head_dim] of its output:
//   dp[j] = dout . v_j,   dscores[j] = probs[j] (dp[j] - sum_i probs[i] dp[i])  (written: the
//   gradient of the scaled scores, TransformerLens hook_attn_scores),
//   dq = scale sum_j dscores[j] k_j   (written),
//   dk_j += scale dscores[j] q,  dv_j += probs[j] dout   (accumulated, at dk/dv + j*dkv_stride).
void AttentionHeadBackward(const float* q, const float* k, const float* v, int64_t kv_stride,
                           const float* probs, const float* dout, int64_t n_keys, int64_t head_dim,
                           float scale, float* dq, float* dk, float* dv, int64_t dkv_stride,
                           float* dscores);

// ---- The 8-bit KV cache (quantized models) ------------------------------------------------
// A head's key or value row of head_dim numbers in ggml's Q8_0 rounding (format/quant.h
// QuantizeRowQ8_0, llama.cpp's q8_0 KV cache): blocks of 32 numbers along the row, the last one
// shorter when head_dim % 32 != 0, each an f16 scale d = max|x| / 127 and int8 quants
// q = round(x / d) (halves away from zero) in [-128, 127]. Two rules keep the cache finite: d
// saturates at 65504 (a block beyond +-8.3e6, as the f16 cache saturates), and a block holding an
// infinity or a NaN is stored as zeros (the residual stream carries the NaN on anyway).
// Laid out for integer multiply-adds, block by block, for a cache of `capacity` positions (even):
//   key j, element i = 32 b + c:   q[(j * nb + b) * 32 + c]
//   value j, element i = 32 b + c: q[(b * capacity + j - j % 2) * 32 + 2 * c + j % 2]: two
//                                  positions side by side, so that one multiply-add of int16
//                                  pairs (pmaddwd, i32x4.dot_i16x8_s) adds both positions' terms
//   scale of block b of key or value j: d[b * capacity + j]
// with nb = KvBlocks(head_dim). The unused quants of a short last block are written as zeros.
constexpr int64_t kKvBlock = 32;
inline int64_t KvBlocks(int64_t head_dim) { return (head_dim + kKvBlock - 1) / kKvBlock; }
// Bytes of one head's cache of `capacity` positions, keys or values: quants and scales.
inline int64_t KvHeadBytes(int64_t head_dim, int64_t capacity) {
  return KvBlocks(head_dim) * capacity * (kKvBlock + 2);
}
struct KvHeadQ8 {
  const int8_t* q = nullptr;
  const uint16_t* d = nullptr;
  int64_t capacity = 0;
};
// Stores row x: [head_dim] as key or value `j` of a head's cache (q, d as above).
void StoreKeyQ8(const float* x, int64_t head_dim, int64_t j, int8_t* q, uint16_t* d,
                int64_t capacity);
void StoreValueQ8(const float* x, int64_t head_dim, int64_t j, int8_t* q, uint16_t* d,
                  int64_t capacity);

// One query attending to keys 0..n_keys-1 of an 8-bit cache, in integers where the f32 call
// multiplies floats:
//   the query is quantized as a key is (StoreKeyQ8), to qq with block scales dq;
//   scores[j] = sum_b float(sum_c qq[b, c] k_q[j, b, c]) * ((dq[b] * scale) * k_d[j, b])
//               (the integer sums exact; the float terms added in block order);
//   probs = softmax(scores) (Softmax);
//   w[b, j] = probs[j] * v_d[j, b], W = max w, P[b, j] = round(w[b, j] * (32767 / W)) as int16
//               (halves to even; all 0 if W is 0 or so small that 32767 / W overflows);
//   out[32 b + c] = (W / 32767) * sum_k float(sum_{j in run k} P[b, j] v_q[j, b, c]), the exact
//               integer sums over runs of 512 keys, the runs' floats added in order.
// Each probability thus weighs its value with 15 bits relative to the largest weight, and every
// score and value sum is exact but for the float steps named. out may be nullptr (values
// unused): only scores and probs. n_keys <= capacity of both.
void AttentionHead(const float* q, const KvHeadQ8& keys, const KvHeadQ8& values, int64_t n_keys,
                   int64_t head_dim, float scale, float* scores, float* probs, float* out);

// The 16-bit KV cache's conversions, over arrays of n elements.
// F32ToF16Saturated: h[i] = IEEE half bits of x[i] clamped to [-65504, 65504], rounded to
// nearest, ties to even (as numpy's np.clip(x, -65504, 65504).astype(np.float16)), so the
// cache holds no infinities (the f16 AttentionHead would read them as finite numbers). A NaN
// stays a quiet NaN with its sign and top payload bits. F16ToF32: x[i] = the value of half bits
// h[i], exact for every bit pattern.
// Both give format/f16.h's scalar F32ToF16 / F16ToF32 bits on every target (the page and the
// native CLI round the cache alike). Not profiled: they run on rows of one head, thousands of
// calls per forward pass, and the profiler's bookkeeping would cost more than they do.
void F32ToF16Saturated(const float* x, uint16_t* h, int64_t n);
void F16ToF32(const uint16_t* h, float* x, int64_t n);

// Per-call time accounting for profiling a forward pass (tests/kernels/forward_profile_test.cc,
// BENCHMARKS-history.md "Where the time goes"). Off by default: then each kernel call costs one
// relaxed atomic load more. When on, every call of the functions above adds its time to a bucket
// keyed by kernel, weight type and shape (MatMul: rows x cols, T == 1 or not), from any thread.
// Time is the calling thread's CPU time natively, wall-clock time in wasm (no CPU clock there).
struct KernelProfileEntry {
  std::string kernel;  // "MatMul", "PrepareMatMulInput" (with kInt8: quantizing x),
                       // "LayerNorm", "Gelu", "Softmax", "AddInPlace", "AttentionHead"
  TensorType type = TensorType::kF32;  // MatMul's and PrepareMatMulInput's weight type
  int64_t rows = 0, cols = 0;          // MatMul's weight shape (PrepareMatMulInput: 0 x cols)
  bool single_token = false;           // MatMul called with T == 1
  int64_t calls = 0;
  int64_t work = 0;  // MatMul: sum of T; AttentionHead: sum of n_keys; others (and
                     // PrepareMatMulInput): elements
  double seconds = 0;
};
void SetKernelProfiling(bool on);
// The buckets gathered since the last call, most time first; clears them.
std::vector<KernelProfileEntry> TakeKernelProfile();

// Highway targets compiled into this binary that the CPU supports (one entry in wasm), and a way
// for tests to pin dispatch to one of them. ForceKernelTarget(0) restores normal dispatch.
std::vector<int64_t> KernelTargets();
std::string KernelTargetName(int64_t target);
void ForceKernelTarget(int64_t target);
// The target the next dispatched call will use, e.g. "AVX2" or "WASM".
std::string ActiveKernelTargetName();
// True in a WebAssembly module's relaxed SIMD twin (kernels/relaxed_simd.h), where float
// prompts run through FMA; false in every other build.
bool RelaxedSimdKernels();

// How WASM's int8-activation prefill multiplies (matmul-wasm-inl.h): quants widened to int16
// (i32x4.dot_i16x8_s, every engine) per token, or as pairs of columns with 4 tokens in the lanes
// (kPairs, every engine), or 4-byte dots with relaxed SIMD where a probe of this engine finds
// i32x4.relaxed_dot_i8x16_i7x16_add_s exact for every signed a and b unsigned (vpdpbusd) or
// signed (vpdpbssd, ARM's sdot). kAuto: the probe's choice, else kPairs. The tests force the
// others; the 4-byte paths then run on an exact emulation of the instruction. Every path gives
// the same bits. Other targets have one path (kAuto).
enum class Int8DotPath { kAuto, kWidened, kEmulatedUnsignedB, kEmulatedSignedB, kPairs };
std::vector<Int8DotPath> Int8DotPaths();  // kAuto and, in wasm, the four others
void ForceInt8DotPath(Int8DotPath path);
// "auto: relaxed, b unsigned", "widened", ...: what the path runs here.
std::string Int8DotPathName(Int8DotPath path);

}  // namespace gpt2
