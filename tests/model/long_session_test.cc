// Long sessions: one Session reused for many generations to the full context, with the
// observer on and off, must give every time what a fresh Session gives for the same seed (no
// state carried over between conversations), and allocate nothing that outlives it (the
// suite runs under LeakSanitizer in scripts/test.sh).
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/generate.h"
#include "model/sampler.h"
#include "model_test_util.h"
#include "tools/common/synthetic_model.h"

namespace {

std::vector<int> RunToFullContext(gpt2::Session& session, bool observe, uint64_t seed) {
  gpt2::GenerateOptions options;
  options.sampling = gpt2::SamplingParams{0.9f, 40, 0.95f, seed};
  options.max_tokens = 1 << 20;
  options.stop_at_end_of_text = false;
  int observed = 0;
  if (observe) options.run.observer = [&](const gpt2::Activation&) { ++observed; };
  session.Reset();
  std::vector<int> ids;
  const gpt2::StopReason reason = gpt2::Generate(session, {464, 2068}, options, [&](int id) {
    ids.push_back(id);
    return true;
  });
  CHECK(reason == gpt2::StopReason::kContextFull);
  CHECK(observe == (observed > 0));
  return ids;
}

TEST_CASE("twenty generations to the full context in one session repeat a fresh session's",
          "[model][long]") {
  auto m = gpt2_test::LoadModelBytes(
      gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), gpt2::TensorType::kQ8_0, nullptr));
  const int n_ctx = m->model->config().n_ctx;
  // [observe][seed]: with an observer the prompt's logits come from a T-row matmul, which
  // may round differently from the 1-row one, so each mode has its own reference.
  std::vector<int> fresh[2][2];
  for (int observe = 0; observe < 2; ++observe) {
    for (int seed = 0; seed < 2; ++seed) {
      gpt2::Session session(*m->model);
      fresh[observe][seed] = RunToFullContext(session, observe, 100 + seed);
      // Prompt of 2, then one id per free position; the last sampled id is not run.
      REQUIRE(fresh[observe][seed].size() == size_t(n_ctx - 2 + 1));
    }
  }
  gpt2::Session session(*m->model, 2);
  for (int run = 0; run < 20; ++run) {
    INFO("run " << run);
    const int seed = run % 2, observe = run % 4 < 2;
    CHECK(RunToFullContext(session, observe, 100 + seed) == fresh[observe][seed]);
  }
}

// A long unobserved prompt runs in pieces of Session::kPrefillChunk positions; an observed one
// runs in one pass (the pass the golden tests check tensor by tensor against PyTorch). The blocks
// must give the same bits: the KV cache of every position, seen through the next token's logits.
// The prompt's own last logits come from different unembedding calls (the observer gets every
// row, a plain prefill only the last one, which takes the one-row kernel path), so they agree
// only to rounding.
TEST_CASE("a long prompt prefilled in chunks gives one pass's logits bit for bit",
          "[model][long]") {
  for (gpt2::TensorType type : {gpt2::TensorType::kF32, gpt2::TensorType::kQ8_0}) {
    INFO("weights " << int(type));
    gpt2::Config config = gpt2::TinyTestConfig();
    config.n_ctx = 3 * gpt2::Session::kPrefillChunk;
    auto m = gpt2_test::LoadModelBytes(gpt2::SyntheticModelBytes(config, type, nullptr));
    const int V = config.n_vocab;
    const int n = 2 * gpt2::Session::kPrefillChunk + 77;  // two whole chunks and a ragged one
    std::vector<int> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = int((uint32_t(i) * 2654435761u) % uint32_t(V));

    gpt2::Session one_pass(*m->model);
    int observed = 0;
    const float* l1 =
        one_pass.Prefill(ids.data(), n, {[&](const gpt2::Activation&) { ++observed; }});
    REQUIRE(observed > 0);
    const std::vector<float> one(l1, l1 + V);
    const float* s1 = one_pass.Step(ids[0]);
    const std::vector<float> one_next(s1, s1 + V);

    gpt2::Session chunked(*m->model);
    const float* l2 = chunked.Prefill(ids.data(), n);
    CHECK(chunked.position() == n);
    float max_diff = 0;
    for (int v = 0; v < V; ++v) max_diff = std::max(max_diff, std::fabs(l2[v] - one[v]));
    CHECK(max_diff < 1e-4f);
    const float* s2 = chunked.Step(ids[0]);
    CHECK(std::memcmp(s2, one_next.data(), V * sizeof(float)) == 0);
  }
}

// Per-block times of a prompt that runs in chunks cover every chunk, not only the last.
TEST_CASE("block times of a chunked prefill add up its chunks", "[model][long]") {
  // Wide blocks and a small vocabulary, so the blocks are nearly all of a prefill's time.
  gpt2::Config config = gpt2::TinyTestConfig();
  config.n_ctx = 3 * gpt2::Session::kPrefillChunk;
  config.n_vocab = 512;
  config.n_embd = 256;
  config.n_ff = 1024;
  auto m =
      gpt2_test::LoadModelBytes(gpt2::SyntheticModelBytes(config, gpt2::TensorType::kF32, nullptr));
  const int n = 2 * gpt2::Session::kPrefillChunk + 77;
  std::vector<int> ids(n, 464);
  gpt2::Session session(*m->model);
  std::vector<double> ms;
  gpt2::RunOptions run;
  run.block_ms = &ms;
  const auto start = std::chrono::steady_clock::now();
  session.Prefill(ids.data(), n, run);
  const double total =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(ms.size() == size_t(config.n_layer));
  double sum = 0;
  for (double t : ms) sum += t;
  // The last chunk alone would be ~77/333 of the blocks' time.
  CHECK(sum <= total);
  CHECK(sum > 0.5 * total);
}

}  // namespace
