// AttentionHead throughput, not a correctness test: hidden from the default run (Catch2's "[.]").
//   build/native/gpt2_tests "[bench]"                               (best native target)
//   node --no-experimental-fetch build/wasm/gpt2_tests.js "[bench]"  (WASM SIMD128 under V8)
// One GPT-2 small head (head_dim 64) decoding at 128 and 1000 cached positions, each head's keys
// and values contiguous (stride head_dim) as the model's KV cache lays them out. Times are
// process CPU time (in wasm Node's process.cpuUsage, as Emscripten's clock() is wall time, which
// the loaded shared machine makes useless for comparisons).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <vector>

#include "format/f16.h"
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

template <typename T>
T Stored(float x);
template <>
float Stored<float>(float x) {
  return x;
}
template <>
uint16_t Stored<uint16_t>(float x) {
  return F32ToF16(x);
}

// Best time per call of `call` (hot in cache), over batches of 100 calls for ~0.3 s.
template <class Call>
double BestPerCall(const Call& call) {
  call();  // warm up
  double elapsed = 0, best = 1e9;
  do {
    const double t0 = AttentionCpuSeconds();
    for (int i = 0; i < 100; ++i) call();
    const double t = AttentionCpuSeconds() - t0;
    elapsed += t;
    best = std::min(best, t / 100);
  } while (elapsed < 0.3);
  return best;
}

// One head over f32 keys and values (an F32 model's cache, and a prefill's widened f16 chunk)
// and over the 8-bit cache, hot in cache as in a prefill, at a prefill's short and long rows:
// what a call costs whatever its length, and per key.
TEST_CASE("AttentionHead throughput", "[.][bench]") {
  constexpr int64_t kHeadDim = 64;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<int64_t> targets = {0};  // 0: normal dispatch
  // Native only (Emscripten's getenv does not see Node's environment).
  if (std::getenv("GPT2_BENCH_ALL_TARGETS") != nullptr) targets = KernelTargets();
  for (int64_t n_keys : {16, 64, 128, 1000}) {
    std::vector<float> q(kHeadDim), k(static_cast<size_t>(n_keys * kHeadDim)), v(k.size());
    for (float& x : q) x = uni(rng);
    for (float& x : k) x = uni(rng);
    for (float& x : v) x = uni(rng);
    const int64_t capacity = (n_keys + 1) / 2 * 2;
    const size_t quants = static_cast<size_t>(capacity * KvBlocks(kHeadDim) * kKvBlock);
    std::vector<int8_t> kq(quants), vq(quants);
    std::vector<uint16_t> kd(static_cast<size_t>(KvBlocks(kHeadDim) * capacity)), vd(kd.size());
    for (int64_t j = 0; j < n_keys; ++j) {
      StoreKeyQ8(k.data() + j * kHeadDim, kHeadDim, j, kq.data(), kd.data(), capacity);
      StoreValueQ8(v.data() + j * kHeadDim, kHeadDim, j, vq.data(), vd.data(), capacity);
    }
    std::vector<float> probs(n_keys), out(kHeadDim);
    const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    for (int64_t target : targets) {
      ForceKernelTarget(target);
      const double f32 = BestPerCall([&] {
        AttentionHead(q.data(), k.data(), v.data(), kHeadDim, n_keys, kHeadDim, scale, nullptr,
                      probs.data(), out.data());
      });
      const double q8 = BestPerCall([&] {
        AttentionHead(q.data(), KvHeadQ8{kq.data(), kd.data(), capacity},
                      KvHeadQ8{vq.data(), vd.data(), capacity}, n_keys, kHeadDim, scale, nullptr,
                      probs.data(), out.data());
      });
      std::printf(
          "%-8s AttentionHead head_dim %lld n_keys %-5lld f32 %8.2f us/call %6.2f ns/key"
          "   8-bit %8.2f us/call %6.2f ns/key\n",
          ActiveKernelTargetName().c_str(), static_cast<long long>(kHeadDim),
          static_cast<long long>(n_keys), f32 * 1e6, f32 / n_keys * 1e9, q8 * 1e6,
          q8 / n_keys * 1e9);
    }
    ForceKernelTarget(0);
  }
  SUCCEED();
}

constexpr int64_t kCacheHeadDim = 64, kCacheHeads = 144, kCacheCtx = 1024, kCacheKeys = 1000;

// Times sweep(one_head) (all heads once; with one_head, head 0 over and over) on every target
// asked for: with the cache in memory (the weights a decode step streams between two visits of
// a head, 137 MB for GPT-2 small at Q8_0, read between sweeps and not timed), from the
// last-level cache (nothing read between: a decode step's 131 MB of Q8_0 weights and 20 MB of
// 8-bit cache can stay in a large L3), and, with `hot`, one head (in cache, as a prefill's is).
// The best sweep of many, so that other load on the machine, which only ever slows a sweep
// down, does not blur a comparison. bytes: one head's keys and values.
void TimeWholeCache(const char* name, double bytes, bool hot,
                    const std::function<void(bool one_head)>& sweep) {
  std::vector<float> weights(size_t{64} << 20, 1.0f);
  [[maybe_unused]] volatile float sink = 0;  // keeps the untimed weight reads
  std::vector<int64_t> targets = {0};
  if (std::getenv("GPT2_BENCH_ALL_TARGETS") != nullptr) targets = KernelTargets();
  for (int64_t target : targets) {
    ForceKernelTarget(target);
    for (int mode = 0; mode < (hot ? 3 : 1); ++mode) {
      sweep(mode == 2);  // warm up
      double elapsed = 0, best = 1e9;
      do {
        if (mode == 0) {
          float sum = 0;
          for (size_t i = 0; i < weights.size(); i += 16) sum += weights[i];
          sink = sum;
        }
        const double t0 = AttentionCpuSeconds();
        sweep(mode == 2);
        const double t = AttentionCpuSeconds() - t0;
        elapsed += t;
        best = std::min(best, t);
      } while (elapsed < 1.0);
      const double per_head = best / kCacheHeads;
      static const char* const kWhere[3] = {"in memory", "in L3    ", "one head "};
      std::printf(
          "%-8s AttentionHead %s cache %s: %lld heads x n_keys %lld  %8.2f us/head  "
          "%6.2f GB/s\n",
          ActiveKernelTargetName().c_str(), name, kWhere[mode], static_cast<long long>(kCacheHeads),
          static_cast<long long>(kCacheKeys), per_head * 1e6, bytes / per_head / 1e9);
    }
  }
  ForceKernelTarget(0);
}

// Keys and values as f32 (an F32 model's cache) or as f16 bits (an F16 model's), head-major
// ([L, H, n_ctx, D]: 73.7 MB as f32).
template <typename T>
void WholeCacheBench(const char* type_name) {
  constexpr int64_t kHeadDim = kCacheHeadDim, kHeads = kCacheHeads, kCtx = kCacheCtx;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(kHeads * kHeadDim));
  std::vector<T> k(static_cast<size_t>(kHeads * kCtx * kHeadDim)), v(k.size());
  for (float& x : q) x = uni(rng);
  for (T& x : k) x = Stored<T>(uni(rng));
  for (T& x : v) x = Stored<T>(uni(rng));
  std::vector<float> probs(kCacheKeys), out(static_cast<size_t>(kHeads * kHeadDim));
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  TimeWholeCache(type_name, 2.0 * kCacheKeys * kHeadDim * sizeof(T), false, [&](bool) {
    for (int64_t h = 0; h < kHeads; ++h) {
      const size_t base = static_cast<size_t>(h * kCtx * kHeadDim);
      AttentionHead(q.data() + h * kHeadDim, k.data() + base, v.data() + base, kHeadDim, kCacheKeys,
                    kHeadDim, scale, nullptr, probs.data(), out.data() + h * kHeadDim);
    }
  });
}

// The 8-bit cache (kernels.h KvHeadQ8): each head's quants and scales apart, as Session lays
// them out (19.6 MB for GPT-2 small at 1000 positions).
void WholeCacheBenchQ8() {
  constexpr int64_t kHeadDim = kCacheHeadDim, kHeads = kCacheHeads, kCtx = kCacheCtx;
  const int64_t nb = KvBlocks(kHeadDim);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(kHeads * kHeadDim)), row(kHeadDim);
  for (float& x : q) x = uni(rng);
  const size_t quants = static_cast<size_t>(kCtx * nb * kKvBlock);
  const size_t scales = static_cast<size_t>(nb * kCtx);
  std::vector<int8_t> kq(kHeads * quants), vq(kq.size());
  std::vector<uint16_t> kd(kHeads * scales), vd(kd.size());
  for (int64_t h = 0; h < kHeads; ++h) {
    for (int64_t j = 0; j < kCtx; ++j) {
      for (float& x : row) x = uni(rng);
      StoreKeyQ8(row.data(), kHeadDim, j, kq.data() + h * quants, kd.data() + h * scales, kCtx);
      for (float& x : row) x = uni(rng);
      StoreValueQ8(row.data(), kHeadDim, j, vq.data() + h * quants, vd.data() + h * scales, kCtx);
    }
  }
  std::vector<float> probs(kCacheKeys), out(static_cast<size_t>(kHeads * kHeadDim));
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const double bytes = 2.0 * static_cast<double>(KvHeadBytes(kHeadDim, kCacheKeys));
  TimeWholeCache("8-bit", bytes, true, [&](bool one_head) {
    for (int64_t i = 0; i < kHeads; ++i) {
      const int64_t h = one_head ? 0 : i;
      const KvHeadQ8 keys{kq.data() + h * quants, kd.data() + h * scales, kCtx};
      const KvHeadQ8 values{vq.data() + h * quants, vd.data() + h * scales, kCtx};
      AttentionHead(q.data() + h * kHeadDim, keys, values, kCacheKeys, kHeadDim, scale, nullptr,
                    probs.data(), out.data() + h * kHeadDim);
    }
  });
}

// The kernels over a whole decode step's KV cache at position 1000: GPT-2 small's 12 x 12
// heads, each with its own keys and values in the model's layout, one head after the other as
// Session::AttentionStep calls them on one thread. Prints the time per head and the bytes of
// keys and values read per second.
TEST_CASE("AttentionHead throughput over a whole KV cache", "[.][bench]") {
  WholeCacheBench<float>("f32");
  WholeCacheBench<uint16_t>("f16");
  WholeCacheBenchQ8();
  SUCCEED();
}

}  // namespace
}  // namespace gpt2
