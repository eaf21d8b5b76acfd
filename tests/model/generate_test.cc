// The generation loop's stopping rules (src/model/generate.h), on the tiny synthetic model,
// checked against a plain prefill/sample/step loop written here.
#include "model/generate.h"

#include <catch2/catch.hpp>
#include <vector>

#include "base/error.h"
#include "model/sampler.h"
#include "model_test_util.h"

namespace {

using gpt2::GenerateOptions;
using gpt2::StopReason;
using gpt2_test::TinyModel;

TEST_CASE("Generate samples what a hand-written prefill/sample/step loop samples", "[model]") {
  const gpt2::Model& model = TinyModel();
  GenerateOptions options;
  options.sampling = gpt2::SamplingParams{0.9f, 20, 0.95f, 1234};
  options.max_tokens = 12;
  options.stop_at_end_of_text = false;
  const std::vector<int> prompt = {464, 2068, 7586};

  gpt2::Session session(model);
  std::vector<int> got;
  CHECK(gpt2::Generate(session, prompt, options, [&](int id) {
          got.push_back(id);
          return true;
        }) == StopReason::kMaxTokens);

  gpt2::Session by_hand(model);
  gpt2::Sampler sampler(options.sampling);
  const int V = model.config().n_vocab;
  const float* logits = by_hand.Prefill(prompt.data(), 3);
  std::vector<int> want;
  for (int i = 0; i < 12; ++i) {
    want.push_back(sampler.Sample(logits, V));
    if (i + 1 < 12) logits = by_hand.Step(want.back());
  }
  CHECK(got == want);
  CHECK(session.position() == 3 + 11);  // the last sampled token is reported, not run
}

TEST_CASE("Generate stops when the context is full, and when the caller says stop", "[model]") {
  const gpt2::Model& model = TinyModel();
  const int n_ctx = model.config().n_ctx;  // 64
  GenerateOptions options;
  options.sampling.temperature = 0;
  options.max_tokens = 1000;
  options.stop_at_end_of_text = false;
  std::vector<int> prompt(n_ctx - 5, 100);

  gpt2::Session session(model);
  int count = 0;
  CHECK(gpt2::Generate(session, prompt, options, [&](int) { return ++count, true; }) ==
        StopReason::kContextFull);
  CHECK(session.position() == n_ctx);
  CHECK(count == 6);  // 5 run to fill the context, and the one sampled after the last

  session.Reset();
  count = 0;
  CHECK(gpt2::Generate(session, {1, 2, 3}, options, [&](int) { return ++count < 4; }) ==
        StopReason::kStoppedByCaller);
  CHECK(count == 4);

  session.Reset();
  std::vector<int> too_long(n_ctx + 1, 7);
  CHECK_THROWS_AS(gpt2::Generate(session, too_long, options, [](int) { return true; }),
                  gpt2::Error);
  CHECK(session.position() == 0);
}

}  // namespace
