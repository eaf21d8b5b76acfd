// AttentionHead throughput, not a correctness test: hidden from the default run (Catch2's "[.]").
//   build/native/gpt2_tests "[bench]"                               (best native target)
//   node --no-experimental-fetch build/wasm/gpt2_tests.js "[bench]"  (WASM SIMD128 under V8)
// One GPT-2 small head (head_dim 64) decoding at 128 and 1000 cached positions, each head's keys
// and values contiguous (stride head_dim) as the model's KV cache lays them out. Times are
// process CPU time (in wasm Node's process.cpuUsage, as Emscripten's clock() is wall time, which
// the loaded shared machine makes useless for comparisons).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

#include "kernels/kernels.h"

#ifdef __EMSCRIPTEN__
#include <emscripten.h>
#endif

namespace gpt2 {
namespace {

double AttentionCpuSeconds() {
#ifdef __EMSCRIPTEN__
  return EM_ASM_DOUBLE({
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
  });
#else
  return static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
#endif
}

TEST_CASE("AttentionHead throughput", "[.][bench]") {
  constexpr int64_t kHeadDim = 64;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<int64_t> targets = {0};  // 0: normal dispatch
  // Native only (Emscripten's getenv does not see Node's environment).
  if (std::getenv("GPT2_BENCH_ALL_TARGETS") != nullptr) targets = KernelTargets();
  for (int64_t n_keys : {128, 1000}) {
    std::vector<float> q(kHeadDim), k(static_cast<size_t>(n_keys * kHeadDim)), v(k.size());
    for (float& x : q) x = uni(rng);
    for (float& x : k) x = uni(rng);
    for (float& x : v) x = uni(rng);
    std::vector<float> probs(n_keys), out(kHeadDim);
    const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    for (int64_t target : targets) {
      ForceKernelTarget(target);
      auto call = [&] {
        AttentionHead(q.data(), k.data(), v.data(), kHeadDim, n_keys, kHeadDim, scale, nullptr,
                      probs.data(), out.data());
      };
      call();  // warm up
      int reps = 0;
      const double t0 = AttentionCpuSeconds();
      double elapsed = 0;
      do {
        for (int i = 0; i < 100; ++i) call();
        reps += 100;
        elapsed = AttentionCpuSeconds() - t0;
      } while (elapsed < 0.3);
      const double per_call = elapsed / reps;
      std::printf("%-8s AttentionHead head_dim %lld n_keys %-5lld %8.2f us/call  %6.2f ns/key\n",
                  ActiveKernelTargetName().c_str(), static_cast<long long>(kHeadDim),
                  static_cast<long long>(n_keys), per_call * 1e6, per_call / n_keys * 1e9);
    }
    ForceKernelTarget(0);
  }
  SUCCEED();
}

}  // namespace
}  // namespace gpt2
