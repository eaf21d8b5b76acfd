#include "model/layer_norm.h"

#include <cmath>

namespace gpt2 {

namespace {

double Mean(const float* x, int n) {
  double mean = 0;
  for (int i = 0; i < n; ++i) mean += x[i];
  return mean / n;
}

}  // namespace

double InvSigma(const float* x, int n, double eps) {
  const double mean = Mean(x, n);
  double var = 0;
  for (int i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  return 1.0 / std::sqrt(var / n + eps);
}

std::vector<double> RowInvSigmas(const float* x, int64_t rows, int n, double eps) {
  std::vector<double> inv(rows);
  for (int64_t r = 0; r < rows; ++r) inv[r] = InvSigma(x + r * n, n, eps);
  return inv;
}

void FrozenLayerNorm(const float* x, const float* gamma, double inv, int n, float* y) {
  const double mean = Mean(x, n);
  for (int i = 0; i < n; ++i) y[i] = static_cast<float>((x[i] - mean) * inv * gamma[i]);
}

void LayerNormBackward(const float* x, const float* gamma, const float* dy, float* dx, int64_t rows,
                       int n, double eps, bool accumulate) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    const float* gr = dy + r * n;
    float* out = dx + r * n;
    double mean = 0.0;
    for (int i = 0; i < n; ++i) mean += xr[i];
    mean /= double(n);
    double var = 0.0;
    for (int i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const double rstd = 1.0 / std::sqrt(var / double(n) + eps);
    double m1 = 0.0, m2 = 0.0;
    for (int i = 0; i < n; ++i) {
      const double g = double(gr[i]) * gamma[i];
      m1 += g;
      m2 += g * (xr[i] - mean) * rstd;
    }
    m1 /= double(n);
    m2 /= double(n);
    for (int i = 0; i < n; ++i) {
      const double g = double(gr[i]) * gamma[i];
      const float d = static_cast<float>(rstd * (g - m1 - (xr[i] - mean) * rstd * m2));
      out[i] = accumulate ? out[i] + d : d;
    }
  }
}

}  // namespace gpt2
