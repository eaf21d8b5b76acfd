// What the gradients cost against a prefill of the same prompt: a profile, not a test (hidden,
// Catch2's "[.]"). The targets are in prefills of the prompt (GPT-2 small shape, Q8_0,
// one thread, the page's int8 activations): a backward over 64 tokens at most 1.5, a full atp
// at most 4, ig with 16 steps at most 40; what the backward keeps at 128 tokens at most 100 MB.
// scripts/bench-gradients.mjs runs it in wasm and prints those rows (bench.sh, at its end).
//   build/native/gpt2_tests "[profile][gradients_profile]"
//   node --no-experimental-fetch build/wasm/gpt2_tests.js "[profile][gradients_profile]"
// Times are this thread's CPU time natively, wall time in wasm (std::clock), as in
// tests/kernels/forward_profile_test.cc; each phase also lists its kernels' share.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "kernels/kernels.h"
#include "lab/gradients.h"
#include "model/backward.h"
#include "model/session.h"
#include "tools/common/synthetic_model.h"

namespace gpt2 {
namespace {

template <class Run>
double Seconds(const char* phase, double prefill, const Run& run) {
  TakeKernelProfile();
  SetKernelProfiling(true);
  const std::clock_t c0 = std::clock();
  run();
  const double s = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  SetKernelProfiling(false);
  if (prefill > 0)
    std::printf("%-34s %8.1f ms = %5.2f prefills\n", phase, s * 1e3, s / prefill);
  else
    std::printf("%-34s %8.1f ms\n", phase, s * 1e3);
  for (const KernelProfileEntry& e : TakeKernelProfile()) {
    if (e.seconds < 0.02 * s) continue;
    std::printf("    %-22s %5lldx%-5lld %7.1f ms %5.1f%%\n", e.kernel.c_str(),
                static_cast<long long>(e.rows), static_cast<long long>(e.cols), e.seconds * 1e3,
                100 * e.seconds / s);
  }
  return s;
}

TEST_CASE("Gradient costs in prefills, GPT-2 small shape, q8_0",
          "[.][profile][gradients_profile]") {
  const Config config = Gpt2SmallConfig();
  std::vector<uint8_t> bytes = SyntheticModelBytes(config, TensorType::kQ8_0, nullptr);
  std::shared_ptr<const GgufFile> file = GgufFile::Parse(bytes.data(), bytes.size());
  std::unique_ptr<Model> model = Model::FromGguf(file);
  Session session(*model, 1, QuantActivations::kInt8);
  Backward backward(*model, 1);
  const int T = 64;
  std::vector<int> ids(T), other(T);
  for (int i = 0; i < T; ++i) {
    ids[i] = 1 + (i * 37) % 50000;
    other[i] = i == T / 2 ? 777 : ids[i];
  }
  session.Prefill(ids.data(), 16);  // warm-up
  session.Reset();
  std::printf("\n==== GPT-2 small shape, q8_0, 1 thread, int8 activations, %d tokens, %s\n", T,
              ActiveKernelTargetName().c_str());
  const double prefill = Seconds("prefill", 0, [&] {
    session.Reset();
    session.Prefill(ids.data(), T);
  });
  Seconds("forward keeping what backward needs", prefill,
          [&] { backward.Forward(session, ids, nullptr); });
  const MetricSpec spec{T - 1, 11, -1};
  Seconds("backward", prefill, [&] { backward.Run(spec, [](const Activation&) {}); });
  std::printf("saved: %.1f MB\n", backward.SavedBytes() / 1e6);
  Seconds("saliency grad (forward + backward)", prefill,
          [&] { Saliency(session, backward, ids, SaliencyRequest(), nullptr); });
  Seconds("atp (both runs and the backward)", prefill,
          [&] { AttributionPatching(session, backward, ids, other, -1, -1, nullptr); });
  SaliencyRequest ig;
  ig.method = SaliencyMethod::kIntegrated;
  ig.steps = 16;
  Seconds("saliency ig, 16 steps", prefill, [&] { Saliency(session, backward, ids, ig, nullptr); });
  const ScoreSpec score{config.n_layer / 2, 0, T - 1, T / 2};
  backward.Forward(session, ids, nullptr);  // ig leaves its last, one-token run
  Seconds("score backward (block 6's score)", prefill,
          [&] { backward.RunScore(score, [](const Activation&) {}); });
  // The memory bound is at 128 tokens.
  std::vector<int> longer(128);
  for (int i = 0; i < 128; ++i) longer[i] = 1 + (i * 37) % 50000;
  backward.Forward(session, longer, nullptr);
  std::printf("saved at 128 tokens: %.1f MB\n", backward.SavedBytes() / 1e6);
  SUCCEED();
}

}  // namespace
}  // namespace gpt2
