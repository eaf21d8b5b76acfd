// The prompt product on a pool (model/parallel_matmul.h).
#include "model/parallel_matmul.h"

#include <algorithm>

namespace gpt2 {

void ParallelMatMul(ThreadPool& pool, MatMulInput& in, const float* x, int64_t T,
                    const WeightView& w, const float* bias, float* y, QuantActivations act,
                    bool gelu) {
  StartMatMulInput(x, T, w, act, in);
  // Below a few tokens per thread a wake-up of the pool costs more than it saves.
  const int64_t n_parts = T >= 16 ? pool.size() : 1;
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

}  // namespace gpt2
