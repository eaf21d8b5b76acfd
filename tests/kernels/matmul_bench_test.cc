// MatMul throughput, not a correctness test: hidden from the default run (Catch2's "[.]" tag).
//   build/native/gpt2_tests "[bench]"                               (every native target)
//   node --no-experimental-fetch build/wasm/gpt2_tests.js "[bench]"  (WASM SIMD128 under V8)
// GPT-2 small shapes, Q8_0 and Q4_0 weights with f32 and int8 activations, one thread. Times are
// process CPU time (std::clock), steadier than wall time on a shared machine.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "format/quant.h"
#include "kernels/kernels.h"

namespace gpt2 {
namespace {

struct Shape {
  const char* name;
  int64_t rows, cols;
};

double CpuSeconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

TEST_CASE("MatMul throughput", "[.][bench]") {
  const Shape shapes[] = {{"qkv 2304x768", 2304, 768},
                          {"fc 3072x768", 3072, 768},
                          {"proj 768x3072", 768, 3072},
                          {"unembed 50257x768", 50257, 768}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  // GPT2_BENCH_SHAPE=unembed (a substring of a shape's name) runs only the matching shapes
  // (native only: Emscripten's getenv does not see Node's environment).
  const char* only = std::getenv("GPT2_BENCH_SHAPE");
  for (const Shape& shape : shapes) {
    if (only != nullptr && std::strstr(shape.name, only) == nullptr) continue;
    std::vector<float> dense(static_cast<size_t>(shape.rows * shape.cols));
    for (float& v : dense) v = uni(rng);
    std::vector<BlockQ8_0> q8(dense.size() / 32);
    std::vector<BlockQ4_0> q4(dense.size() / 32);
    QuantizeRowQ8_0(dense.data(), q8.data(), static_cast<int64_t>(dense.size()));
    QuantizeRowQ4_0(dense.data(), q4.data(), static_cast<int64_t>(dense.size()));
    for (int64_t T : {1, 64}) {
      if (T > 1 && shape.rows > 4096) continue;  // the model unembeds only the last token
      std::vector<float> x(static_cast<size_t>(T * shape.cols)), y(T * shape.rows);
      for (float& v : x) v = uni(rng);
      for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
        const WeightView w{type, type == TensorType::kQ8_0 ? static_cast<const void*>(q8.data())
                                                            : static_cast<const void*>(q4.data()),
                           shape.rows, shape.cols};
        const double bytes = static_cast<double>(shape.rows * shape.cols / 32) *
                             (type == TensorType::kQ8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0));
        for (QuantActivations act : {QuantActivations::kFloat, QuantActivations::kInt8}) {
          MatMul(x.data(), T, w, nullptr, y.data(), 0, shape.rows, act);  // warm up
          // Repeat for at least ~0.2 s of CPU time.
          int reps = 0;
          const double t0 = CpuSeconds();
          double elapsed = 0;
          do {
            MatMul(x.data(), T, w, nullptr, y.data(), 0, shape.rows, act);
            ++reps;
            elapsed = CpuSeconds() - t0;
          } while (elapsed < 0.2);
          const double per_call = elapsed / reps;
          std::printf("%-8s %-18s %-5s T=%-3lld %-5s %8.1f us/call  %6.2f GB/s weights  %6.1f GFLOP/s\n",
                      ActiveKernelTargetName().c_str(), shape.name,
                      type == TensorType::kQ8_0 ? "q8_0" : "q4_0", static_cast<long long>(T),
                      act == QuantActivations::kInt8 ? "int8" : "f32", per_call * 1e6,
                      bytes / per_call / 1e9,
                      2.0 * shape.rows * shape.cols * T / per_call / 1e9);
        }
      }
    }
  }
  SUCCEED();
}

}  // namespace
}  // namespace gpt2
