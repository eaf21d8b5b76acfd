// The backward kernels against their scalar twins (kernels/reference.h) on every compiled target,
// for every weight type and awkward sizes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "format/f16.h"
#include "format/quant.h"
#include "format/tensor_type.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"

namespace gpt2 {
namespace {

// MatMulTransposed: float sums over the rows in another order than the double twin; relative to
// sum_o |dy W| (the condition of the sum). As for the forward MatMul's budget (2e-6).
constexpr double kTransposedRelTol = 2e-6;
// GeluBackward: Highway's Exp (4 ulp), a division and the float product s (1 - s), against
// tanh in double; observed within 1e-6 relative of the derivative's scale.
constexpr double kGeluBackwardAbsTol = 2e-6;
constexpr double kGeluBackwardRelTol = 4e-6;
// AttentionHeadBackward: float dots and sums of head_dim and n_keys terms.
constexpr double kAttentionBackwardAbsTol = 1e-5;
constexpr double kAttentionBackwardRelTol = 1e-5;

void ForEachTarget(const std::function<void()>& body) {
  struct Restore {
    ~Restore() { ForceKernelTarget(0); }
  } restore;
  for (int64_t target : KernelTargets()) {
    ForceKernelTarget(target);
    INFO("kernel target " << KernelTargetName(target));
    body();
  }
}

// A random [rows, cols] weight matrix of `type`, with its decoded values (the twin's view is
// independent: it decodes blocks itself).
struct TestWeights {
  std::vector<uint8_t> bytes;
  WeightView view;
};

TestWeights MakeWeights(TensorType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  TestWeights w;
  const size_t row_bytes = RowBytes(type, cols);
  w.bytes.resize(row_bytes * rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = normal(rng);
    uint8_t* out = w.bytes.data() + r * row_bytes;
    switch (type) {
      case TensorType::kF32:
        std::memcpy(out, row.data(), row_bytes);
        break;
      case TensorType::kF16:
        for (int64_t c = 0; c < cols; ++c) {
          const uint16_t h = F32ToF16(row[c]);
          std::memcpy(out + 2 * c, &h, 2);
        }
        break;
      case TensorType::kQ8_0:
        QuantizeRowQ8_0(row.data(), reinterpret_cast<BlockQ8_0*>(out), cols);
        break;
      case TensorType::kQ4_0:
        QuantizeRowQ4_0(row.data(), reinterpret_cast<BlockQ4_0*>(out), cols);
        break;
      default:
        FAIL("unexpected type");
    }
  }
  w.view = WeightView{type, w.bytes.data(), rows, cols};
  return w;
}

void CheckTransposed(TensorType type, int64_t T, int64_t rows, int64_t cols, int64_t col_begin,
                     int64_t col_end) {
  INFO("type " << static_cast<int>(type) << " T " << T << " rows " << rows << " cols " << cols
               << " columns [" << col_begin << ", " << col_end << ")");
  std::mt19937 rng(static_cast<uint32_t>(T * 7919 + rows * 31 + cols));
  const TestWeights w = MakeWeights(type, rows, cols, rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> dy(static_cast<size_t>(T * rows));
  for (float& v : dy) v = normal(rng);
  constexpr float kSentinel = -777.25f;
  std::vector<float> want(static_cast<size_t>(T * cols), kSentinel);
  reference::MatMulTransposed(dy.data(), T, w.view, want.data(), col_begin, col_end);
  // The condition of each sum: sum_o |dy W|, from the twin run on |dy| and |W|-free bounds.
  std::vector<float> abs_dy(dy.size());
  for (size_t i = 0; i < dy.size(); ++i) abs_dy[i] = std::fabs(dy[i]);
  std::vector<float> scale(static_cast<size_t>(T * cols));
  {
    std::vector<float> decoded(static_cast<size_t>(cols));
    std::fill(scale.begin(), scale.end(), 0.0f);
    for (int64_t o = 0; o < rows; ++o) {
      DequantizeRow(type, w.bytes.data() + o * RowBytes(type, cols), decoded.data(), cols);
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t c = 0; c < cols; ++c)
          scale[t * cols + c] += abs_dy[t * rows + o] * std::fabs(decoded[c]);
      }
    }
  }
  ForEachTarget([&] {
    std::vector<float> got(static_cast<size_t>(T * cols), kSentinel);
    MatMulTransposed(dy.data(), T, w.view, got.data(), col_begin, col_end);
    double worst = 0.0;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t c = 0; c < cols; ++c) {
        const size_t i = static_cast<size_t>(t * cols + c);
        if (c < col_begin || c >= col_end) {
          REQUIRE(got[i] == kSentinel);
          continue;
        }
        const double err = std::fabs(double(got[i]) - want[i]);
        worst = std::max(worst, err / (scale[i] + 1e-30));
        REQUIRE(err <= kTransposedRelTol * scale[i] + 1e-30);
      }
    }
    INFO("worst relative error " << worst);
  });
}

TEST_CASE("MatMulTransposed matches its scalar twin for every weight type", "[kernels][backward]") {
  for (TensorType type :
       {TensorType::kF32, TensorType::kF16, TensorType::kQ8_0, TensorType::kQ4_0}) {
    // Odd token counts (short last tile), rows past one strip, several column strips.
    CheckTransposed(type, 1, 3, 32, 0, 32);
    CheckTransposed(type, 5, 129, 96, 0, 96);
    CheckTransposed(type, 7, 300, 64, 32, 64);
    CheckTransposed(type, 4, 17, 160, 64, 160);
  }
  // Float weights take any column count, the last strip partial.
  CheckTransposed(TensorType::kF32, 3, 5, 7, 0, 7);
  CheckTransposed(TensorType::kF32, 6, 33, 45, 32, 45);
  CheckTransposed(TensorType::kF16, 9, 130, 41, 0, 41);
}

TEST_CASE("MatMulTransposed rejects column ranges off the blocks", "[kernels][backward]") {
  std::mt19937 rng(1);
  const TestWeights w = MakeWeights(TensorType::kQ8_0, 4, 64, rng);
  std::vector<float> dy(4), dx(64);
  REQUIRE_THROWS_AS(MatMulTransposed(dy.data(), 1, w.view, dx.data(), 16, 64), Error);
  REQUIRE_THROWS_AS(MatMulTransposed(dy.data(), 1, w.view, dx.data(), 0, 48), Error);
  REQUIRE_THROWS_AS(MatMulTransposed(dy.data(), 1, w.view, dx.data(), 0, 96), Error);
  REQUIRE_THROWS_AS(reference::MatMulTransposed(dy.data(), 1, w.view, dx.data(), 32, 16), Error);
}

TEST_CASE("GeluBackward matches its scalar twin", "[kernels][backward]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-14.0f, 14.0f);
  for (int64_t n : {1, 3, 4, 5, 15, 16, 17, 33, 4097}) {
    INFO("n " << n);
    std::vector<float> x(static_cast<size_t>(n)), dy(static_cast<size_t>(n));
    for (float& v : x) v = wide(rng);
    for (float& v : dy) v = wide(rng);
    x[0] = 0.0f;
    if (n > 2) x[1] = -20.0f;  // past the clamp: derivative 0
    std::vector<float> want(x.size());
    reference::GeluBackward(x.data(), dy.data(), want.data(), n);
    ForEachTarget([&] {
      std::vector<float> got(dy);
      GeluBackward(x.data(), got.data(), got.data(), n);  // in place, as the model calls it
      for (int64_t i = 0; i < n; ++i) {
        INFO("x " << x[i]);
        REQUIRE(std::fabs(double(got[i]) - want[i]) <=
                kGeluBackwardAbsTol + kGeluBackwardRelTol * std::fabs(dy[i]) * 1.2);
      }
    });
  }
}

TEST_CASE("GeluBackward is the derivative of Gelu", "[kernels][backward]") {
  // Independent of the twin: central differences of the forward kernel in double steps.
  for (float x : {-3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 1.5f, 4.0f}) {
    const double h = 1e-3;
    float a = static_cast<float>(x - h), b = static_cast<float>(x + h);
    reference::Gelu(&a, 1);
    reference::Gelu(&b, 1);
    const double numeric = (double(b) - double(a)) / (2 * h);
    float one = 1.0f, got = 0.0f;
    reference::GeluBackward(&x, &one, &got, 1);
    REQUIRE(std::fabs(got - numeric) <= 1e-3);
  }
}

TEST_CASE("AttentionHeadBackward matches its scalar twin", "[kernels][backward]") {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t head_dim : {1, 5, 16, 64, 67}) {
    for (int64_t n_keys : {1, 2, 7, 33}) {
      INFO("head_dim " << head_dim << " n_keys " << n_keys);
      const int64_t stride = head_dim + 3;
      std::vector<float> q(head_dim), k(n_keys * stride), v(n_keys * stride), dout(head_dim);
      for (float& x : q) x = normal(rng);
      for (float& x : k) x = normal(rng);
      for (float& x : v) x = normal(rng);
      for (float& x : dout) x = normal(rng);
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      std::vector<float> probs(n_keys), scratch(n_keys), out(head_dim);
      reference::AttentionHead(q.data(), k.data(), v.data(), stride, n_keys, head_dim, scale,
                               nullptr, probs.data(), out.data());
      std::vector<float> want_dq(head_dim), want_dk(n_keys * stride, 0.5f),
          want_dv(n_keys * stride, -0.5f), want_ds(n_keys);
      reference::AttentionHeadBackward(q.data(), k.data(), v.data(), stride, probs.data(),
                                       dout.data(), n_keys, head_dim, scale, want_dq.data(),
                                       want_dk.data(), want_dv.data(), stride, want_ds.data());
      ForEachTarget([&] {
        std::vector<float> dq(head_dim), dk(n_keys * stride, 0.5f), dv(n_keys * stride, -0.5f),
            ds(n_keys);
        AttentionHeadBackward(q.data(), k.data(), v.data(), stride, probs.data(), dout.data(),
                              n_keys, head_dim, scale, dq.data(), dk.data(), dv.data(), stride,
                              ds.data());
        auto near = [](double got, double want) {
          return std::fabs(got - want) <=
                 kAttentionBackwardAbsTol + kAttentionBackwardRelTol * std::fabs(want);
        };
        for (int64_t d = 0; d < head_dim; ++d) REQUIRE(near(dq[d], want_dq[d]));
        for (size_t i = 0; i < dk.size(); ++i) {
          REQUIRE(near(dk[i], want_dk[i]));
          REQUIRE(near(dv[i], want_dv[i]));
        }
        for (int64_t j = 0; j < n_keys; ++j) REQUIRE(near(ds[j], want_ds[j]));
      });
    }
  }
}

}  // namespace
}  // namespace gpt2
