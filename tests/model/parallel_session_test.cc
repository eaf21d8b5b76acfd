// A Session on several threads splits every product's rows (and, for long enough prompts, the
// quantization of its activations by tokens) over its pool, and runs GELU inside the first MLP
// product's row chunks: none of it may change a bit of what one thread computes.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "model_test_util.h"
#include "tools/common/synthetic_model.h"

namespace {

// Logits of a prompt's prefill, then of three decode steps, one vector after another.
std::vector<float> RunLogits(const gpt2::Model& model, int threads, const std::vector<int>& ids,
                             bool observe) {
  gpt2::Session session(model, threads);
  gpt2::RunOptions run;
  if (observe) run.observer = [](const gpt2::Activation&) {};
  const int V = model.config().n_vocab;
  const float* logits = session.Prefill(ids.data(), int(ids.size()), run);
  std::vector<float> out(logits, logits + V);
  for (int i = 0; i < 3; ++i) {
    logits = session.Step(ids[i], run);
    out.insert(out.end(), logits, logits + V);
  }
  return out;
}

TEST_CASE("two and three threads give one thread's logits bit for bit", "[model][threads]") {
  gpt2::Config config = gpt2::TinyTestConfig();
  for (gpt2::TensorType type :
       {gpt2::TensorType::kQ8_0, gpt2::TensorType::kQ4_0, gpt2::TensorType::kF32}) {
    INFO("weights " << int(type));
    auto m = gpt2_test::LoadModelBytes(gpt2::SyntheticModelBytes(config, type, nullptr));
    for (int n : {5, 41}) {  // below and above the token count that splits the quantization
      std::vector<int> ids(n);
      for (int i = 0; i < n; ++i)
        ids[i] = int((uint32_t(i) * 2654435761u) % uint32_t(config.n_vocab));
      for (bool observe : {false, true}) {
        INFO("prompt " << n << " observed " << observe);
        const std::vector<float> one = RunLogits(*m->model, 1, ids, observe);
        for (int threads : {2, 3}) {
          const std::vector<float> many = RunLogits(*m->model, threads, ids, observe);
          REQUIRE(many.size() == one.size());
          CHECK(std::memcmp(many.data(), one.data(), one.size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

}  // namespace
