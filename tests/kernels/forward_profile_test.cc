// Where a GPT-2 small forward pass spends its time, kernel by kernel: a profile, not a test, so
// hidden from the default run (Catch2's "[.]" tag). BENCHMARKS-history.md records its output
// ("Where the time goes"; the latest shares under "Per CPU kind (issue 37)").
//   build/native/gpt2_tests "[profile]"                                (native, best target)
//   node --no-experimental-fetch build/wasm/gpt2_tests.js "[profile]"  (WASM SIMD128 under V8)
//   ... "[profile][q8_0]" for one weight type (q8_0, q4_0, f32); "[profile][q8_0_int8]": Q8_0
//   with the page's int8 activations (the others run the native CLI's default, kFastest)
// The model is GPT-2 small's shape with synthetic weights, built in memory; one thread; a
// 128-token prefill, then 64 decode steps. Each phase prints its kernels' time (SetKernel
// Profiling), labelled with the GPT-2 matrix their shape belongs to, and the phase's own time
// measured the same way (natively the CPU time of this single-threaded process, in wasm wall
// time: std::clock is wall time there); "outside kernels" is the difference (embedding rows,
// KV cache copies, loop overhead). The phase's wall time is printed too: on a shared machine a
// large gap between it and the CPU time means the wall figures include time spent descheduled.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "kernels/kernels.h"
#include "model/session.h"
#include "tools/common/synthetic_model.h"

namespace gpt2 {
namespace {

// The GPT-2 matrix a MatMul shape belongs to (shapes are unique in GPT-2 small).
std::string MatrixName(const Config& c, const KernelProfileEntry& e) {
  if (e.rows == 3 * c.n_embd && e.cols == c.n_embd) return "attn qkv";
  if (e.rows == c.n_embd && e.cols == c.n_embd) return "attn proj";
  if (e.rows == c.n_ff && e.cols == c.n_embd) return "mlp fc";
  if (e.rows == c.n_embd && e.cols == c.n_ff) return "mlp proj";
  if (e.rows == c.n_vocab && e.cols == c.n_embd) return "unembedding";
  return std::to_string(e.rows) + "x" + std::to_string(e.cols);
}

const char* TypeName(TensorType t) {
  switch (t) {
    case TensorType::kF32:
      return "f32";
    case TensorType::kF16:
      return "f16";
    case TensorType::kQ8_0:
      return "q8_0";
    case TensorType::kQ4_0:
      return "q4_0";
  }
  return "?";
}

double WeightBytes(const KernelProfileEntry& e) {
  const double n = static_cast<double>(e.rows) * static_cast<double>(e.cols);
  switch (e.type) {
    case TensorType::kF32:
      return 4 * n;
    case TensorType::kF16:
      return 2 * n;
    case TensorType::kQ8_0:
      return n / 32 * 34;
    case TensorType::kQ4_0:
      return n / 32 * 18;
  }
  return 0;
}

template <class Run>
void ProfilePhase(const Config& c, const char* phase, int tokens, const Run& run) {
  TakeKernelProfile();  // drop anything gathered before
  SetKernelProfiling(true);
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  run();
  const double total = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  SetKernelProfiling(false);
  const std::vector<KernelProfileEntry> entries = TakeKernelProfile();
  std::printf("\n%s, %s: %d tokens, %.1f ms = %.1f tok/s (wall %.1f ms)\n", phase,
              ActiveKernelTargetName().c_str(), tokens, total * 1e3, tokens / total, wall * 1e3);
  std::printf("  %-30s %7s %10s %7s %6s  %s\n", "kernel", "calls", "ms/token", "ms", "%", "rate");
  double in_kernels = 0;
  for (const KernelProfileEntry& e : entries) {
    in_kernels += e.seconds;
    std::string name = e.kernel;
    char rate[64] = "";
    if (e.kernel == "MatMul") {
      name += std::string(" ") + TypeName(e.type) + " " + MatrixName(c, e);
      // Decode reads each weight once per call; prefill's rate is compute: 2 flops per weight
      // per token.
      if (e.single_token) {
        std::snprintf(rate, sizeof(rate), "%.1f GB/s of weights",
                      WeightBytes(e) * static_cast<double>(e.calls) / e.seconds / 1e9);
      } else {
        std::snprintf(rate, sizeof(rate), "%.1f GFLOP/s",
                      2.0 * e.rows * e.cols * static_cast<double>(e.work) / e.seconds / 1e9);
      }
    }
    std::printf("  %-30s %7lld %10.3f %7.1f %5.1f%%  %s\n", name.c_str(),
                static_cast<long long>(e.calls), e.seconds * 1e3 / tokens, e.seconds * 1e3,
                100 * e.seconds / total, rate);
  }
  std::printf("  %-30s %7s %10.3f %7.1f %5.1f%%\n", "outside kernels", "",
              (total - in_kernels) * 1e3 / tokens, (total - in_kernels) * 1e3,
              100 * (total - in_kernels) / total);
}

// activations: the native CLI's default (kFastest: f32 prompts on AVX-512) unless asked for the
// page's int8 (which kFastest is in wasm anyway).
// prompt tokens are prefilled, then `decode` tokens decoded after them.
void ProfileForward(TensorType type, QuantActivations activations = QuantActivations::kFastest,
                    int prompt_tokens = 128, int decode = 64) {
  const Config config = Gpt2SmallConfig();
  std::vector<uint8_t> bytes = SyntheticModelBytes(config, type, nullptr);
  std::shared_ptr<const GgufFile> file = GgufFile::Parse(bytes.data(), bytes.size());
  std::unique_ptr<Model> model = Model::FromGguf(file);
  Session session(*model, 1, activations);
  const int kPrompt = prompt_tokens, kDecode = decode;
  std::vector<int> prompt(kPrompt);
  for (int i = 0; i < kPrompt; ++i) prompt[i] = 1 + (i * 37) % 50000;
  // Warm-up (V8 tiers hot wasm functions up while they run; caches, page faults natively).
  session.Prefill(prompt.data(), 16);
  for (int i = 0; i < 4; ++i) session.Step(198);
  session.Reset();
  std::printf("\n==== GPT-2 small shape, %s weights, 1 thread, %s activations\n", TypeName(type),
              activations == QuantActivations::kInt8 ? "int8" : "fastest");
  ProfilePhase(config, "prefill", kPrompt, [&] { session.Prefill(prompt.data(), kPrompt); });
  const std::string positions = "decode (positions " + std::to_string(kPrompt) + "-" +
                                std::to_string(kPrompt + kDecode - 1) + ")";
  ProfilePhase(config, positions.c_str(), kDecode, [&] {
    for (int i = 0; i < kDecode; ++i) session.Step(198);
  });
}

TEST_CASE("Forward pass profile, q8_0", "[.][profile][q8_0]") {
  ProfileForward(TensorType::kQ8_0);
  SUCCEED();
}
TEST_CASE("Forward pass profile, q8_0, int8 activations", "[.][profile][q8_0_int8]") {
  ProfileForward(TensorType::kQ8_0, QuantActivations::kInt8);
  SUCCEED();
}
// Long prompts (issue 10: a 1024-token prefill against a 128-token one, decode at position
// 1000 against 0): where the time of the attention's longer rows goes.
TEST_CASE("Forward pass profile, q8_0, a long prompt", "[.][profile][q8_0_long]") {
  ProfileForward(TensorType::kQ8_0, QuantActivations::kInt8, 1000, 16);
}

TEST_CASE("Forward pass profile, q4_0", "[.][profile][q4_0]") {
  ProfileForward(TensorType::kQ4_0);
  SUCCEED();
}
TEST_CASE("Forward pass profile, f32", "[.][profile][f32]") {
  ProfileForward(TensorType::kF32);
  SUCCEED();
}

}  // namespace
}  // namespace gpt2
