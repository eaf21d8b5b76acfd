// Per-target kernels of the backward pass (kernels.h "Backward"): the product with a weight
// matrix's transpose, GELU's derivative and one query's attention backward. Included once per
// Highway target by kernels.cc, after matmul-inl.h (whose weight decoders it reuses).
#if defined(GPT2_KERNELS_BACKWARD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GPT2_KERNELS_BACKWARD_INL_H_
#undef GPT2_KERNELS_BACKWARD_INL_H_
#else
#define GPT2_KERNELS_BACKWARD_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "format/quant.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"
#include "kernels/matmul-decode-inl.h"
#include "kernels/matmul-float-inl.h"

HWY_BEFORE_NAMESPACE();
namespace gpt2 {
namespace HWY_NAMESPACE {
namespace backward {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kLanes = hn::MaxLanes(DF());

// A strip is kStripCols columns (one quantization block) of kStripRows weight rows, decoded to
// f32 once and then multiplied into every token: 8 KB, so it stays in L1 beside the tokens'
// [T, kStripRows] gradients while they run over it. Only this much of the matrix is ever
// dequantized at a time.
constexpr int64_t kStripCols = 32;
constexpr int64_t kStripRows = 64;
// Tokens per register tile: 4 tokens x 2 vectors of columns = 8 accumulators, which fits the
// 16 registers of SSE/WASM with room for the weights and the broadcasts.
constexpr int64_t kTileTokens = 4;
static_assert(kStripCols % (2 * kLanes) == 0, "a strip must be whole vector pairs");

// a * b + c: an FMA on x86 and in the relaxed WASM module (matmul::Fma).
HWY_INLINE VF Fma(VF a, VF b, VF c) { return matmul::Fma(a, b, c); }

// Rows [o0, o0 + n) of W, columns [c, c + cw), as f32 into strip [n, kStripCols] (columns past
// cw zero). Quantized types are whole blocks (cw == 32, c % 32 == 0).
HWY_INLINE void DecodeStrip(const WeightView& w, int64_t o0, int64_t n, int64_t c, int64_t cw,
                            float* HWY_RESTRICT strip) {
  const DF df;
  for (int64_t i = 0; i < n; ++i) {
    float* out = strip + i * kStripCols;
    const int64_t o = o0 + i;
    if (w.type == TensorType::kQ8_0 || w.type == TensorType::kQ4_0) {
      matmul::VF v[matmul::kBlockVecs];
      uint16_t d_bits;
      if (w.type == TensorType::kQ8_0) {
        const BlockQ8_0* block = static_cast<const BlockQ8_0*>(w.data) + (o * w.cols + c) / 32;
        matmul::DecodeBlock(df, block, v);
        d_bits = block->d;
      } else {
        const BlockQ4_0* block = static_cast<const BlockQ4_0*>(w.data) + (o * w.cols + c) / 32;
        matmul::DecodeBlock(df, block, v);
        d_bits = block->d;
      }
      const VF d = hn::Set(df, kernels_internal::HalfToFloat(d_bits));
      for (size_t j = 0; j < matmul::kBlockVecs; ++j) {
        hn::StoreU(hn::Mul(d, v[j]), df, out + j * kLanes);
      }
    } else if (cw == kStripCols && w.type == TensorType::kF16) {
      const uint16_t* row = static_cast<const uint16_t*>(w.data) + o * w.cols + c;
      for (int64_t j = 0; j < kStripCols; j += 2 * kLanes) {
        VF lo, hi;
        matmul::HalvesToF32(df, row + j, lo, hi);
        hn::StoreU(lo, df, out + j);
        hn::StoreU(hi, df, out + j + kLanes);
      }
    } else if (cw == kStripCols) {
      std::memcpy(out, static_cast<const float*>(w.data) + o * w.cols + c,
                  kStripCols * sizeof(float));
    } else {
      // A float matrix's last columns: element by element, the rest of the strip zero.
      for (int64_t j = 0; j < kStripCols; ++j) {
        if (j >= cw) {
          out[j] = 0.0f;
        } else if (w.type == TensorType::kF16) {
          out[j] = kernels_internal::HalfToFloat(
              static_cast<const uint16_t*>(w.data)[o * w.cols + c + j]);
        } else {
          out[j] = static_cast<const float*>(w.data)[o * w.cols + c + j];
        }
      }
    }
  }
}

}  // namespace backward

// dx[t, c] = sum_o dy[t, o] W[o, c] for c in [col_begin, col_end) (kernels.h MatMulTransposed).
// Column strips one block wide, kStripRows rows at a time: each strip is decoded once and
// multiplied into all T tokens, 4 at a time in registers, the o sum in row order (each chunk's
// partial sum added to dx).
HWY_NOINLINE void MatMulTransposedKernel(const float* dy, int64_t T, const WeightView& w, float* dx,
                                         int64_t col_begin, int64_t col_end) {
  namespace hn = hwy::HWY_NAMESPACE;
  using backward::kLanes;
  using backward::kStripCols;
  using backward::kStripRows;
  using backward::kTileTokens;
  const backward::DF df;
  static thread_local std::vector<float> strip_buffer;
  strip_buffer.resize(kStripRows * kStripCols);
  float* strip = strip_buffer.data();
  const int64_t rows = w.rows, cols = w.cols;
  for (int64_t t = 0; t < T; ++t)
    std::fill(dx + t * cols + col_begin, dx + t * cols + col_end, 0.0f);
  HWY_ALIGN float tile[kTileTokens * kStripCols];
  // Row chunks outermost: a chunk's rows (kStripRows whole rows of the matrix) stay in cache
  // while its strips are decoded one after another, so the weights stream from memory once.
  for (int64_t o0 = 0; o0 < rows; o0 += kStripRows) {
    const int64_t n = std::min(kStripRows, rows - o0);
    for (int64_t c = col_begin; c < col_end; c += kStripCols) {
      const int64_t cw = std::min(kStripCols, col_end - c);
      backward::DecodeStrip(w, o0, n, c, cw, strip);
      for (int64_t t0 = 0; t0 < T; t0 += kTileTokens) {
        const int64_t nt = std::min(kTileTokens, T - t0);
        // Missing tokens of a short last tile repeat the last one; their sums are dropped.
        const float* g[kTileTokens];
        for (int64_t k = 0; k < kTileTokens; ++k) {
          g[k] = dy + (t0 + std::min(k, nt - 1)) * rows + o0;
        }
        for (int64_t j = 0; j < kStripCols; j += 2 * kLanes) {
          backward::VF a00 = hn::Zero(df), a01 = hn::Zero(df), a10 = hn::Zero(df),
                       a11 = hn::Zero(df), a20 = hn::Zero(df), a21 = hn::Zero(df),
                       a30 = hn::Zero(df), a31 = hn::Zero(df);
          const float* s = strip + j;
          for (int64_t i = 0; i < n; ++i, s += kStripCols) {
            const backward::VF w0 = hn::LoadU(df, s);
            const backward::VF w1 = hn::LoadU(df, s + kLanes);
            const backward::VF b0 = hn::Set(df, g[0][i]);
            const backward::VF b1 = hn::Set(df, g[1][i]);
            const backward::VF b2 = hn::Set(df, g[2][i]);
            const backward::VF b3 = hn::Set(df, g[3][i]);
            a00 = backward::Fma(b0, w0, a00);
            a01 = backward::Fma(b0, w1, a01);
            a10 = backward::Fma(b1, w0, a10);
            a11 = backward::Fma(b1, w1, a11);
            a20 = backward::Fma(b2, w0, a20);
            a21 = backward::Fma(b2, w1, a21);
            a30 = backward::Fma(b3, w0, a30);
            a31 = backward::Fma(b3, w1, a31);
          }
          hn::Store(a00, df, tile + 0 * kStripCols + j);
          hn::Store(a01, df, tile + 0 * kStripCols + j + kLanes);
          hn::Store(a10, df, tile + 1 * kStripCols + j);
          hn::Store(a11, df, tile + 1 * kStripCols + j + kLanes);
          hn::Store(a20, df, tile + 2 * kStripCols + j);
          hn::Store(a21, df, tile + 2 * kStripCols + j + kLanes);
          hn::Store(a30, df, tile + 3 * kStripCols + j);
          hn::Store(a31, df, tile + 3 * kStripCols + j + kLanes);
        }
        for (int64_t k = 0; k < nt; ++k) {
          float* out = dx + (t0 + k) * cols + c;
          for (int64_t j = 0; j < cw; ++j) out[j] += tile[k * kStripCols + j];
        }
      }
    }
  }
}

// dx = dy * gelu'(x) for kernels.h's Gelu (the tanh form), through the same sigmoid identity:
// with s = 1 / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3), gelu = x s and
//   gelu' = s + x * 2u' * s (1 - s),  u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
// Beyond the clamp (x < ~-10) s is 0 and so is the derivative. dx may alias dy.
HWY_NOINLINE void GeluBackwardKernel(const float* x, const float* dy, float* dx, int64_t n) {
  namespace hn = hwy::HWY_NAMESPACE;
  using backward::kLanes;
  const backward::DF df;
  const backward::VF k_sqrt_2_over_pi = hn::Set(df, 0.7978845608028654f);
  const backward::VF k_minus_2_sqrt_2_over_pi = hn::Set(df, -2.0f * 0.7978845608028654f);
  const backward::VF k_cubic = hn::Set(df, 0.044715f);
  const backward::VF k_cubic3 = hn::Set(df, 3.0f * 0.044715f);
  const backward::VF k_one = hn::Set(df, 1.0f);
  const backward::VF k_two = hn::Set(df, 2.0f);
  const backward::VF k_clamp = hn::Set(df, 88.0f);
  const auto derivative = [&](backward::VF v, backward::VF g) {
    const backward::VF v2 = hn::Mul(v, v);
    const backward::VF inner = hn::MulAdd(hn::Mul(k_cubic, v), v2, v);
    const backward::VF minus_2u = hn::Mul(k_minus_2_sqrt_2_over_pi, inner);
    const backward::VF s = hn::Div(k_one, hn::Add(k_one, hn::Exp(df, hn::Min(minus_2u, k_clamp))));
    const backward::VF du = hn::Mul(k_sqrt_2_over_pi, hn::MulAdd(k_cubic3, v2, k_one));
    const backward::VF ds = hn::Mul(hn::Mul(s, hn::Sub(k_one, s)), hn::Mul(k_two, du));
    const backward::VF d = hn::IfThenZeroElse(hn::Gt(minus_2u, k_clamp), hn::MulAdd(v, ds, s));
    return hn::Mul(g, d);
  };
  int64_t i = 0;
  for (; i + static_cast<int64_t>(kLanes) <= n; i += kLanes) {
    hn::StoreU(derivative(hn::LoadU(df, x + i), hn::LoadU(df, dy + i)), df, dx + i);
  }
  if (i < n) {
    HWY_ALIGN float bx[kLanes] = {};
    HWY_ALIGN float bg[kLanes] = {};
    const size_t rest = static_cast<size_t>(n - i);
    std::memcpy(bx, x + i, rest * sizeof(float));
    std::memcpy(bg, dy + i, rest * sizeof(float));
    hn::Store(derivative(hn::Load(df, bx), hn::Load(df, bg)), df, bg);
    std::memcpy(dx + i, bg, rest * sizeof(float));
  }
}

namespace backward {

HWY_INLINE float Dot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, int64_t n) {
  const DF df;
  VF acc0 = hn::Zero(df), acc1 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 2 * static_cast<int64_t>(kLanes) <= n; i += 2 * kLanes) {
    acc0 = Fma(hn::LoadU(df, a + i), hn::LoadU(df, b + i), acc0);
    acc1 = Fma(hn::LoadU(df, a + i + kLanes), hn::LoadU(df, b + i + kLanes), acc1);
  }
  for (; i + static_cast<int64_t>(kLanes) <= n; i += kLanes) {
    acc0 = Fma(hn::LoadU(df, a + i), hn::LoadU(df, b + i), acc0);
  }
  float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1)));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y += alpha * x.
HWY_INLINE void Axpy(float alpha, const float* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t n) {
  const DF df;
  const VF a = hn::Set(df, alpha);
  int64_t i = 0;
  for (; i + static_cast<int64_t>(kLanes) <= n; i += kLanes) {
    hn::StoreU(Fma(a, hn::LoadU(df, x + i), hn::LoadU(df, y + i)), df, y + i);
  }
  for (; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace backward

// kernels.h AttentionHeadBackward: one query's backward through softmax(scale q.k) v.
HWY_NOINLINE void AttentionHeadBackwardKernel(const float* q, const float* k, const float* v,
                                              int64_t kv_stride, const float* probs,
                                              const float* dout, int64_t n_keys, int64_t head_dim,
                                              float scale, float* dq, float* dk, float* dv,
                                              int64_t dkv_stride, float* dscores) {
  // dp_j = dout . v_j, and the probability-weighted mean of dp.
  float mean = 0.0f;
  for (int64_t j = 0; j < n_keys; ++j) {
    dscores[j] = backward::Dot(dout, v + j * kv_stride, head_dim);
    mean += probs[j] * dscores[j];
  }
  std::fill(dq, dq + head_dim, 0.0f);
  for (int64_t j = 0; j < n_keys; ++j) {
    dscores[j] = probs[j] * (dscores[j] - mean);
    const float ds = scale * dscores[j];
    backward::Axpy(ds, k + j * kv_stride, dq, head_dim);
    backward::Axpy(ds, q, dk + j * dkv_stride, head_dim);
    backward::Axpy(probs[j], dout, dv + j * dkv_stride, head_dim);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace gpt2
HWY_AFTER_NAMESPACE();

#endif  // GPT2_KERNELS_BACKWARD_INL_H_
