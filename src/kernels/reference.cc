// Scalar twins of the kernels: the executable specification. Plain loops, double accumulators,
// weights decoded element by element straight from the ggml block layout (format/quant.h).
#include "kernels/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "format/f16.h"
#include "format/quant.h"
#include "kernels/internal.h"

namespace gpt2 {
namespace kernels_internal {

void CheckMatMulArgs(const float* x, int64_t T, const WeightView& w, const float* y,
                     int64_t row_begin, int64_t row_end) {
  const uint32_t type = static_cast<uint32_t>(w.type);
  if (w.type != TensorType::kF32 && w.type != TensorType::kF16 && w.type != TensorType::kQ8_0 &&
      w.type != TensorType::kQ4_0) {
    throw Error("MatMul: unsupported weight type id " + std::to_string(type) +
                " (supported: f32, f16, q8_0, q4_0)");
  }
  if (w.rows < 0 || w.cols <= 0 || T < 0) {
    throw Error("MatMul: bad shape (rows " + std::to_string(w.rows) + ", cols " +
                std::to_string(w.cols) + ", tokens " + std::to_string(T) + ")");
  }
  if (w.cols % BlockElems(w.type) != 0) {
    throw Error("MatMul: " + std::to_string(w.cols) +
                " columns is not a multiple of the quantization block size 32");
  }
  if (row_begin < 0 || row_begin > row_end || row_end > w.rows) {
    throw Error("MatMul: row range [" + std::to_string(row_begin) + ", " + std::to_string(row_end) +
                ") is not inside [0, " + std::to_string(w.rows) + ")");
  }
  if (T > 0 && row_end > row_begin && (x == nullptr || y == nullptr || w.data == nullptr)) {
    throw Error("MatMul: null input, output or weight pointer");
  }
}

void CheckMatMulTransposedArgs(const float* dy, int64_t T, const WeightView& w, const float* dx,
                               int64_t col_begin, int64_t col_end) {
  // The row range of CheckMatMulArgs is the whole matrix: every row feeds every column.
  CheckMatMulArgs(dy, T, w, dx, 0, w.rows);
  const int64_t block = BlockElems(w.type);
  if (col_begin < 0 || col_begin > col_end || col_end > w.cols) {
    throw Error("MatMulTransposed: column range [" + std::to_string(col_begin) + ", " +
                std::to_string(col_end) + ") is not inside [0, " + std::to_string(w.cols) + ")");
  }
  if (col_begin % block != 0 || (col_end != w.cols && col_end % block != 0)) {
    throw Error("MatMulTransposed: column range [" + std::to_string(col_begin) + ", " +
                std::to_string(col_end) + ") does not fall on blocks of " + std::to_string(block) +
                " columns");
  }
  if (T > 0 && col_end > col_begin && (dy == nullptr || dx == nullptr || w.data == nullptr)) {
    throw Error("MatMulTransposed: null input, output or weight pointer");
  }
}

}  // namespace kernels_internal

namespace reference {
namespace {

// IEEE 754 binary16 written as the standard defines it, (-1)^s 2^(e-15) (1 + m/1024) or, for
// e == 0, (-1)^s 2^-14 (m/1024); deliberately a different formulation from HalfToFloat.
float HalfToFloatSpec(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double value;
  if (exponent == 0) {
    value = std::ldexp(mantissa / 1024.0, -14);
  } else if (exponent == 31) {
    value = mantissa == 0 ? std::numeric_limits<double>::infinity()
                          : std::numeric_limits<double>::quiet_NaN();
  } else {
    value = std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
  }
  return static_cast<float>(sign ? -value : value);
}

// W[r, c] as a float, decoded per format/quant.h (ggml dequantize_row_q8_0 / _q4_0: d * q in
// float).
float WeightAt(const WeightView& w, int64_t r, int64_t c) {
  switch (w.type) {
    case TensorType::kF32:
      return static_cast<const float*>(w.data)[r * w.cols + c];
    case TensorType::kF16:
      return HalfToFloatSpec(static_cast<const uint16_t*>(w.data)[r * w.cols + c]);
    case TensorType::kQ8_0: {
      const BlockQ8_0& block = static_cast<const BlockQ8_0*>(w.data)[(r * w.cols + c) / 32];
      return HalfToFloatSpec(block.d) * static_cast<float>(block.qs[c % 32]);
    }
    case TensorType::kQ4_0: {
      const BlockQ4_0& block = static_cast<const BlockQ4_0*>(w.data)[(r * w.cols + c) / 32];
      const int i = static_cast<int>(c % 32);
      const int nibble = i < 16 ? (block.qs[i] & 0x0f) : (block.qs[i - 16] >> 4);
      return HalfToFloatSpec(block.d) * static_cast<float>(nibble - 8);
    }
  }
  return 0.0f;  // unreachable: CheckMatMulArgs rejected the type
}

// The integer weights of block b of row r, unscaled: Q8_0 qs, Q4_0 nibble - 8.
void BlockQuants(const WeightView& w, int64_t r, int64_t b, int (&q)[32], float& d) {
  if (w.type == TensorType::kQ8_0) {
    const BlockQ8_0& block = static_cast<const BlockQ8_0*>(w.data)[r * (w.cols / 32) + b];
    for (int i = 0; i < 32; ++i) q[i] = block.qs[i];
    d = HalfToFloatSpec(block.d);
  } else {
    const BlockQ4_0& block = static_cast<const BlockQ4_0*>(w.data)[r * (w.cols / 32) + b];
    for (int i = 0; i < 16; ++i) {
      q[i] = (block.qs[i] & 0x0f) - 8;
      q[i + 16] = (block.qs[i] >> 4) - 8;
    }
    d = HalfToFloatSpec(block.d);
  }
}

// QuantActivations::kInt8 (kernels.h): ggml's ggml_vec_dot_q8_0_q8_0 / _q4_0_q8_0 in scalar
// form. The per-block integer sums are exact; the block scale is the f32 product dw * dx, as
// ggml computes it; blocks are summed in double.
void MatMulInt8Activations(const float* x, int64_t T, const WeightView& w, const float* bias,
                           float* y, int64_t row_begin, int64_t row_end) {
  const int64_t nb = w.cols / 32;
  std::vector<BlockQ8_0> qx(static_cast<size_t>(nb));
  for (int64_t t = 0; t < T; ++t) {
    QuantizeRowQ8_0(x + t * w.cols, qx.data(), w.cols);
    for (int64_t r = row_begin; r < row_end; ++r) {
      double sum = bias != nullptr ? bias[r] : 0.0;
      for (int64_t b = 0; b < nb; ++b) {
        int qw[32];
        float dw;
        BlockQuants(w, r, b, qw, dw);
        int64_t isum = 0;
        for (int i = 0; i < 32; ++i) isum += qw[i] * qx[b].qs[i];
        const float scale = dw * HalfToFloatSpec(qx[b].d);
        sum += static_cast<double>(scale) * static_cast<double>(isum);
      }
      y[t * w.rows + r] = static_cast<float>(sum);
    }
  }
}

}  // namespace

void MatMul(const float* x, int64_t T, const WeightView& w, const float* bias, float* y,
            int64_t row_begin, int64_t row_end, QuantActivations act) {
  kernels_internal::CheckMatMulArgs(x, T, w, y, row_begin, row_end);
  // kFastest is one of the other two, chosen by the target that would run the kernel.
  if (act == QuantActivations::kFastest) act = FastestQuantActivations(T);
  if ((w.type == TensorType::kQ8_0 || w.type == TensorType::kQ4_0) &&
      act == QuantActivations::kInt8) {
    MatMulInt8Activations(x, T, w, bias, y, row_begin, row_end);
    return;
  }
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t r = row_begin; r < row_end; ++r) {
      double sum = bias != nullptr ? bias[r] : 0.0;
      for (int64_t c = 0; c < w.cols; ++c) {
        sum += static_cast<double>(x[t * w.cols + c]) * WeightAt(w, r, c);
      }
      y[t * w.rows + r] = static_cast<float>(sum);
    }
  }
}

void LayerNorm(const float* x, const float* gamma, const float* beta, float eps, int64_t n,
               float* y) {
  if (n <= 0) return;
  double mean = 0.0;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= static_cast<double>(n);
  double var = 0.0;
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<double>(n);
  const double inv_std = 1.0 / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<float>((x[i] - mean) * inv_std * gamma[i] + beta[i]);
  }
}

void Gelu(float* x, int64_t n) {
  const double kSqrt2OverPi = std::sqrt(2.0 / M_PI);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double u = kSqrt2OverPi * (v + 0.044715 * v * v * v);
    x[i] = static_cast<float>(0.5 * v * (1.0 + std::tanh(u)));
  }
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - max);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(std::exp(static_cast<double>(x[i]) - max) / sum);
  }
}

void AddInPlace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

namespace {

float KvValue(float x) { return x; }
float KvValue(uint16_t x) { return HalfToFloatSpec(x); }

template <typename T>
void AttentionHeadOf(const float* q, const T* k, const T* v, int64_t kv_stride, int64_t n_keys,
                     int64_t head_dim, float scale, float* scores, float* probs, float* out) {
  for (int64_t j = 0; j < n_keys; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < head_dim; ++d) {
      dot += static_cast<double>(q[d]) * KvValue(k[j * kv_stride + d]);
    }
    probs[j] = static_cast<float>(scale * dot);
    if (scores != nullptr) scores[j] = probs[j];
  }
  Softmax(probs, n_keys);
  for (int64_t d = 0; d < head_dim; ++d) {
    double sum = 0.0;
    for (int64_t j = 0; j < n_keys; ++j) {
      sum += static_cast<double>(probs[j]) * KvValue(v[j * kv_stride + d]);
    }
    out[d] = static_cast<float>(sum);
  }
}

}  // namespace

void AttentionHead(const float* q, const float* k, const float* v, int64_t kv_stride,
                   int64_t n_keys, int64_t head_dim, float scale, float* scores, float* probs,
                   float* out) {
  AttentionHeadOf(q, k, v, kv_stride, n_keys, head_dim, scale, scores, probs, out);
}

// Keys and values decoded from f16 bits, then the f32 twin's arithmetic.
void AttentionHead(const float* q, const uint16_t* k, const uint16_t* v, int64_t kv_stride,
                   int64_t n_keys, int64_t head_dim, float scale, float* scores, float* probs,
                   float* out) {
  AttentionHeadOf(q, k, v, kv_stride, n_keys, head_dim, scale, scores, probs, out);
}

// kernels.h's formula for the 8-bit cache, literally: element by element, the integer sums in
// int64, the float steps one statement each (so no compiler fuses a multiply into an add).
void AttentionHead(const float* q, const KvHeadQ8& keys, const KvHeadQ8& values, int64_t n_keys,
                   int64_t head_dim, float scale, float* scores, float* probs, float* out) {
  const int64_t nb = KvBlocks(head_dim);
  std::vector<int8_t> qq(static_cast<size_t>(nb * kKvBlock));
  std::vector<float> qd(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) {
    const uint16_t d = kernels_internal::QuantizeKvBlock(
        q + b * kKvBlock, std::min(kKvBlock, head_dim - b * kKvBlock), qq.data() + b * kKvBlock, 1);
    qd[b] = HalfToFloatSpec(d) * scale;
  }
  for (int64_t j = 0; j < n_keys; ++j) {
    float s = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
      int64_t dot = 0;
      for (int64_t c = 0; c < kKvBlock; ++c) {
        dot += int64_t{qq[b * kKvBlock + c]} * keys.q[(j * nb + b) * kKvBlock + c];
      }
      const float factor = qd[b] * HalfToFloatSpec(keys.d[b * keys.capacity + j]);
      const float term = static_cast<float>(dot) * factor;
      s = b == 0 ? term : s + term;
    }
    probs[j] = s;
    if (scores != nullptr) scores[j] = s;
  }
  Softmax(probs, n_keys);
  if (out == nullptr) return;
  std::vector<float> w(static_cast<size_t>(nb * n_keys));
  float W = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t j = 0; j < n_keys; ++j) {
      w[b * n_keys + j] = probs[j] * HalfToFloatSpec(values.d[b * values.capacity + j]);
      W = std::max(W, w[b * n_keys + j]);
    }
  }
  const float ratio = W > 0.0f ? 32767.0f / W : 0.0f;
  const float inv = std::isfinite(ratio) ? ratio : 0.0f;
  const float out_scale = W / 32767.0f;
  for (int64_t i = 0; i < head_dim; ++i) {
    const int64_t b = i / kKvBlock, c = i % kKvBlock;
    float sum = 0.0f;
    int64_t run = 0;
    for (int64_t j = 0; j < n_keys; ++j) {
      const float weight = w[b * n_keys + j] * inv;
      const int64_t P = static_cast<int64_t>(std::nearbyint(weight));
      run += P * values.q[(b * values.capacity + j - j % 2) * kKvBlock + 2 * c + j % 2];
      if (j % 512 == 511 || j == n_keys - 1) {
        sum += static_cast<float>(run);
        run = 0;
      }
    }
    out[i] = sum * out_scale;
  }
}

void MatMulTransposed(const float* dy, int64_t T, const WeightView& w, float* dx, int64_t col_begin,
                      int64_t col_end) {
  kernels_internal::CheckMatMulTransposedArgs(dy, T, w, dx, col_begin, col_end);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = col_begin; c < col_end; ++c) {
      double sum = 0.0;
      for (int64_t o = 0; o < w.rows; ++o) {
        sum += static_cast<double>(dy[t * w.rows + o]) * WeightAt(w, o, c);
      }
      dx[t * w.cols + c] = static_cast<float>(sum);
    }
  }
}

// d/dx of 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), in the tanh form:
// 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'.
void GeluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  const double kSqrt2OverPi = std::sqrt(2.0 / M_PI);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double th = std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v));
    const double du = kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * v * v);
    dx[i] = static_cast<float>(dy[i] * (0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * du));
  }
}

void AttentionHeadBackward(const float* q, const float* k, const float* v, int64_t kv_stride,
                           const float* probs, const float* dout, int64_t n_keys, int64_t head_dim,
                           float scale, float* dq, float* dk, float* dv, int64_t dkv_stride,
                           float* dscores) {
  std::vector<double> dp(static_cast<size_t>(n_keys));
  double mean = 0.0;
  for (int64_t j = 0; j < n_keys; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < head_dim; ++d) dot += double(dout[d]) * v[j * kv_stride + d];
    dp[j] = dot;
    mean += probs[j] * dot;
  }
  for (int64_t d = 0; d < head_dim; ++d) {
    double sum = 0.0;
    for (int64_t j = 0; j < n_keys; ++j) sum += probs[j] * (dp[j] - mean) * k[j * kv_stride + d];
    dq[d] = static_cast<float>(scale * sum);
  }
  for (int64_t j = 0; j < n_keys; ++j) {
    const double ds = probs[j] * (dp[j] - mean);
    dscores[j] = static_cast<float>(ds);
    for (int64_t d = 0; d < head_dim; ++d) {
      dk[j * dkv_stride + d] += static_cast<float>(scale * ds * q[d]);
      dv[j * dkv_stride + d] += static_cast<float>(probs[j] * double(dout[d]));
    }
  }
}

void F32ToF16Saturated(const float* x, uint16_t* h, int64_t n) {
  constexpr float kHalfMax = 65504.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    // NaN kept out of the clamp: clang turns the clamp into wasm's f32.min/f32.max, which give
    // the canonical NaN (sign and payload lost) where native code passes v through.
    h[i] = gpt2::F32ToF16(std::isnan(v) ? v : std::min(std::max(v, -kHalfMax), kHalfMax));
  }
}

void F16ToF32(const uint16_t* h, float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = gpt2::F16ToF32(h[i]);
}

}  // namespace reference
}  // namespace gpt2
