// The products of model/matmul_on.h.
#include "model/matmul_on.h"

#include <algorithm>

#include "model/thread_pool.h"

namespace gpt2 {

// Splits a matmul's output rows over the pool in chunks of whole rows. x is prepared (for
// int8 activations: quantized) once into `in`, which every chunk then reads; with enough tokens
// the preparation is split over the pool by tokens too (serial, it was ~2% of a wasm prefill).
// With gelu, y = gelu(x W^T + bias): each chunk applies GELU to its own columns while they are
// in cache, in parallel, with the same bits as one Gelu over all of y (it is elementwise).
void MatMulOn(ThreadPool& pool, MatMulInput& in, const float* x, int64_t T, const WeightView& w,
              const float* bias, float* y, QuantActivations act, bool gelu) {
  StartMatMulInput(x, T, w, act, in);
  // Below a few tokens per thread a wake-up of the pool costs more than it saves; f32 and f16
  // weights multiply x as it is, so there is nothing to prepare.
  const bool quantizes = act != QuantActivations::kFloat &&
                         (w.type == TensorType::kQ8_0 || w.type == TensorType::kQ4_0);
  const int64_t n_parts = T >= 16 && quantizes ? pool.size() : 1;
  if (n_parts > 1) {
    pool.ParallelFor(n_parts, [&](int64_t part) {
      PrepareMatMulInputRows(in, T * part / n_parts, T * (part + 1) / n_parts);
    });
  } else {
    PrepareMatMulInputRows(in, 0, T);
  }
  const auto run = [&](int64_t begin, int64_t end) {
    MatMul(in, w, bias, y, begin, end);
    if (gelu) {
      for (int64_t t = 0; t < T; ++t) Gelu(y + t * w.rows + begin, end - begin);
    }
  };
  // Chunks of whole row grains: every row gets the bits one thread would compute.
  const int64_t grains = (w.rows + kMatMulRowGrain - 1) / kMatMulRowGrain;
  const int64_t n_chunks = std::min<int64_t>(grains, int64_t(pool.size()) * 4);
  if (n_chunks <= 1 || pool.size() == 1) {
    run(0, w.rows);
    return;
  }
  const auto bound = [&](int64_t chunk) {
    return std::min(w.rows, grains * chunk / n_chunks * kMatMulRowGrain);
  };
  pool.ParallelFor(n_chunks, [&](int64_t chunk) { run(bound(chunk), bound(chunk + 1)); });
}

// dx [rows, w.cols] = dy [rows, w.rows] W, the columns split over the pool in whole blocks.
void MatMulTransposedOn(ThreadPool& pool, const float* dy, int64_t rows, const WeightView& w,
                        float* dx) {
  constexpr int64_t kGrain = 32;  // a quantization block: the kernel's column ranges start there
  const int64_t grains = (w.cols + kGrain - 1) / kGrain;
  const int64_t n_chunks = std::min<int64_t>(grains, int64_t(pool.size()) * 2);
  if (n_chunks <= 1) {
    MatMulTransposed(dy, rows, w, dx, 0, w.cols);
    return;
  }
  const auto bound = [&](int64_t chunk) {
    return std::min(w.cols, grains * chunk / n_chunks * kGrain);
  };
  pool.ParallelFor(n_chunks, [&](int64_t chunk) {
    MatMulTransposed(dy, rows, w, dx, bound(chunk), bound(chunk + 1));
  });
}

}  // namespace gpt2
