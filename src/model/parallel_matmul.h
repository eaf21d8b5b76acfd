// The engine's prompt product on a ThreadPool: kernels.h's MatMul over many rows, its output
// rows split over the pool. The forward's every product goes through it (session.cc), and so
// may any pass over the model's weights between a session's calls (the dashboards' logit tables
// on Session::pool()).
#pragma once

#include <cstdint>

#include "kernels/kernels.h"
#include "model/thread_pool.h"

namespace gpt2 {

// y [T, w.rows] = x [T, w.cols] W^T + bias (bias [w.rows] or nullptr), as MatMul(x, T, w, bias,
// y, 0, w.rows, act), with the same bits on any number of threads: the output rows go to the
// pool in chunks of whole kMatMulRowGrain grains. x is prepared (for int8 activations:
// quantized) once into `in` (reusable scratch), which every chunk then reads; with enough tokens
// the preparation is split over the pool by tokens too (serial, it was ~2% of a wasm prefill).
// With gelu, y = gelu(x W^T + bias): each chunk applies GELU to its own columns while they are
// in cache, in parallel, with the same bits as one Gelu over all of y (it is elementwise).
void ParallelMatMul(ThreadPool& pool, MatMulInput& in, const float* x, int64_t T,
                    const WeightView& w, const float* bias, float* y, QuantActivations act,
                    bool gelu = false);

}  // namespace gpt2
