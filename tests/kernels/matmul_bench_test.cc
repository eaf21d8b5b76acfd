// MatMul throughput, not a correctness test: hidden from the default run (Catch2's "[.]" tag).
//   build/native/gpt2_tests "[bench]"                               (best native target)
//   node --no-experimental-fetch build/wasm/gpt2_tests.js "[bench]"  (WASM SIMD128 under V8)
// GPT-2 small shapes, F32 weights, and Q8_0 and Q4_0 weights with f32 and int8 activations,
// one thread. Times are process CPU time (std::clock natively; in wasm under Node its
// process.cpuUsage(), where std::clock would be wall time), steadier than wall time on a shared
// machine.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#if defined(__EMSCRIPTEN__)
#include <emscripten.h>
#endif

#include "format/quant.h"
#include "kernels/kernels.h"

namespace gpt2 {
namespace {

struct Shape {
  const char* name;
  int64_t rows, cols;
};

#if defined(__EMSCRIPTEN__)
// User + system CPU time of the Node process; wall time where there is no process (a browser).
// The body is JavaScript: clang-format would split its !== into != =.
// clang-format off
EM_JS(double, NodeCpuSeconds, (), {
  if (typeof process !== 'undefined' && process.cpuUsage) {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
  }
  return performance.now() / 1e3;
});
// clang-format on
double CpuSeconds() { return NodeCpuSeconds(); }
#else
double CpuSeconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }
#endif

TEST_CASE("MatMul throughput", "[.][bench]") {
  const Shape shapes[] = {{"attn out 768x768", 768, 768},
                          {"qkv 2304x768", 2304, 768},
                          {"fc 3072x768", 3072, 768},
                          {"proj 768x3072", 768, 3072},
                          {"unembed 50257x768", 50257, 768}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  // Native only (Emscripten's getenv does not see Node's environment):
  // GPT2_BENCH_SHAPE=unembed (a substring of a shape's name) runs only the matching shapes,
  // GPT2_BENCH_TYPE=q8_0 only that weight type, GPT2_BENCH_ALL_TARGETS=1 every compiled target.
  const char* only = std::getenv("GPT2_BENCH_SHAPE");
  const char* only_type = std::getenv("GPT2_BENCH_TYPE");
  std::vector<int64_t> targets = {0};  // 0: normal dispatch
  if (std::getenv("GPT2_BENCH_ALL_TARGETS") != nullptr) targets = KernelTargets();
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
      for (TensorType type : {TensorType::kF32, TensorType::kQ8_0, TensorType::kQ4_0}) {
        const char* type_name = type == TensorType::kF32    ? "f32"
                                : type == TensorType::kQ8_0 ? "q8_0"
                                                            : "q4_0";
        if (only_type != nullptr && std::strcmp(type_name, only_type) != 0) continue;
        const void* data = type == TensorType::kF32    ? static_cast<const void*>(dense.data())
                           : type == TensorType::kQ8_0 ? static_cast<const void*>(q8.data())
                                                       : static_cast<const void*>(q4.data());
        const WeightView w{type, data, shape.rows, shape.cols};
        const double elems = static_cast<double>(shape.rows * shape.cols);
        const double bytes = type == TensorType::kF32    ? 4 * elems
                             : type == TensorType::kQ8_0 ? elems / 32 * sizeof(BlockQ8_0)
                                                         : elems / 32 * sizeof(BlockQ4_0);
        std::vector<QuantActivations> acts = {QuantActivations::kFloat};
        if (type != TensorType::kF32) acts.push_back(QuantActivations::kInt8);
        for (int64_t target : targets) {
          ForceKernelTarget(target);
          for (QuantActivations act : acts) {
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
            std::printf(
                "%-8s %-18s %-5s T=%-3lld %-5s %8.1f us/call  %6.2f GB/s weights  %6.1f GFLOP/s\n",
                ActiveKernelTargetName().c_str(), shape.name, type_name, static_cast<long long>(T),
                act == QuantActivations::kInt8 ? "int8" : "f32", per_call * 1e6,
                bytes / per_call / 1e9, 2.0 * elems * T / per_call / 1e9);
          }
        }
        ForceKernelTarget(0);
        if (T > 1 && shape.rows <= 4096) {  // the backward's product dy @ W (MatMulTransposed)
          std::vector<float> dy(static_cast<size_t>(T * shape.rows)), dx(T * shape.cols);
          for (float& v : dy) v = uni(rng);
          MatMulTransposed(dy.data(), T, w, dx.data(), 0, shape.cols);  // warm up
          int reps = 0;
          const double t0 = CpuSeconds();
          double elapsed = 0;
          do {
            MatMulTransposed(dy.data(), T, w, dx.data(), 0, shape.cols);
            ++reps;
            elapsed = CpuSeconds() - t0;
          } while (elapsed < 0.2);
          std::printf("%-8s %-18s %-5s T=%-3lld %-5s %8.1f us/call  %6.1f GFLOP/s (dy @ W)\n",
                      ActiveKernelTargetName().c_str(), shape.name, type_name,
                      static_cast<long long>(T), "f32", elapsed / reps * 1e6,
                      2.0 * elems * T / (elapsed / reps) / 1e9);
        }
      }
    }
  }
  SUCCEED();
}

// The memory limit of decode, which reads every weight once per token: a plain read loop on one
// core (native: `gpt2_tests "Memory read bandwidth"`) over buffers of GPT-2 small's Q8_0 and F32
// matrix bytes, read again and again as decode does, as 1 sequential stream and as 4 (the
// buffer's quarters side by side, as a decode tile reads 4 weight rows). Integer sums, which
// the compiler vectorizes.
uint64_t SumStreams(const std::vector<uint64_t>& buffer, size_t streams) {
  const size_t len = buffer.size() / streams;
  uint64_t sums[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < len; ++i) {
    for (size_t s = 0; s < streams; ++s) sums[s] += buffer[s * len + i];
  }
  return sums[0] + sums[1] + sums[2] + sums[3];
}

TEST_CASE("Memory read bandwidth", "[.][bench]") {
  for (const int64_t megabytes : {137, 500}) {
    std::vector<uint64_t> buffer(static_cast<size_t>(megabytes * 1000000 / 8), 1);  // backed
    for (const size_t streams : {1, 4}) {
      const uint64_t per_pass = SumStreams(buffer, streams);  // also the warm-up
      CHECK(per_pass == buffer.size() / streams * streams);
      int passes = 0;
      const double t0 = CpuSeconds();
      double elapsed = 0;
      do {
        CHECK(SumStreams(buffer, streams) == per_pass);
        ++passes;
        elapsed = CpuSeconds() - t0;
      } while (elapsed < 1.0);
      std::printf("read loop over %lld MB, %zu stream(s): %.2f GB/s (%d passes, one thread)\n",
                  static_cast<long long>(megabytes), streams,
                  static_cast<double>(per_pass) * 8 * passes / elapsed / 1e9, passes);
    }
  }
}

}  // namespace
}  // namespace gpt2
