// LayerNorm taken apart, for the analyses that differentiate or freeze it (the forward's
// LayerNorm is kernels.h's): y = (x - mean(x)) / sigma(x) * gamma + beta, sigma(x) =
// sqrt(var(x) + eps) with the biased variance (torch.nn.LayerNorm). Sums run in double.
//
// "Frozen" is the replacement model's LayerNorm (circuit-tracer; graph/replacement.h) and QK
// attribution's: 1/sigma held at the real run's value, so the map is linear in x.
#pragma once

#include <cstdint>
#include <vector>

namespace gpt2 {

// 1/sigma(x) of one row x [n].
double InvSigma(const float* x, int n, double eps);
// 1/sigma of each row of x [rows, n].
std::vector<double> RowInvSigmas(const float* x, int64_t rows, int n, double eps);

// The frozen LayerNorm without its bias: y = (x - mean(x)) inv gamma, y [n].
void FrozenLayerNorm(const float* x, const float* gamma, double inv, int n, float* y);

// The frozen LayerNorm's backward (its transpose), accumulated:
//   dx += inv (dy gamma - mean(dy gamma)),   gamma null: 1.
// dy in float or double (QK attribution's products are double). Defined here so that the graph's
// backward, which runs it once per row and block of every pass, inlines it (out of line, its
// WebAssembly build ran ~3 % slower).
template <typename T>
void FrozenLayerNormBackward(const T* dy, const float* gamma, double inv, int n, float* dx) {
  double m = 0;
  for (int i = 0; i < n; ++i) m += double(dy[i]) * (gamma ? gamma[i] : 1.0f);
  m /= n;
  for (int i = 0; i < n; ++i) {
    dx[i] += static_cast<float>(inv * (double(dy[i]) * (gamma ? gamma[i] : 1.0f) - m));
  }
}

// torch.nn.LayerNorm's input gradient (its weights fixed, sigma not frozen), row by row over x
// [rows, n]: xhat = (x - mean) rstd, g = dy gamma, dx = rstd (g - mean(g) - xhat mean(g xhat));
// written to dx, or added to it with accumulate.
void LayerNormBackward(const float* x, const float* gamma, const float* dy, float* dx, int64_t rows,
                       int n, double eps, bool accumulate);

}  // namespace gpt2
