// The kernels' products (kernels.h) split over a ThreadPool's threads: the forward's MatMul by
// whole row grains, the backward's MatMulTransposed by whole quantization blocks of columns. The
// session, the backward and the attribution graph's backward all split their products here.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace gpt2 {

class ThreadPool;

// y [T, w.rows] = x [T, w.cols] W^T + bias (kernels.h MatMul; bias may be null), with gelu
// y = gelu(x W^T + bias). x is prepared once into `in` (with kInt8 activations: quantized, by
// token ranges over the pool when there are enough tokens), then the rows of W are split over the
// pool in whole kMatMulRowGrain grains, so every row gets the bits of one MatMul call whatever
// the pool's size.
void MatMulOn(ThreadPool& pool, MatMulInput& in, const float* x, int64_t T, const WeightView& w,
              const float* bias, float* y, QuantActivations act, bool gelu = false);

// dx [rows, w.cols] = dy [rows, w.rows] W (kernels.h MatMulTransposed), its columns split over
// the pool's threads.
void MatMulTransposedOn(ThreadPool& pool, const float* dy, int64_t rows, const WeightView& w,
                        float* dx);

}  // namespace gpt2
