// The backward pass (model/backward.h) against PyTorch autograd: scripts/make_golden.py's
// write_gradients() differentiates the same metric on the same tiny synthetic model and writes
// the gradient at every hook, plain and under each intervention (tests/data/golden_gradients.bin).
#include "model/backward.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../test_paths.h"
#include "base/error.h"
#include "golden_file.h"
#include "intervention_cases.h"
#include "model/session.h"
#include "model_test_util.h"
#include "tools/common/synthetic_model.h"

namespace gpt2_test {
namespace {

// f32 against PyTorch's f32 (different summation orders), relative to each tensor's largest
// gradient: the bound. Observed below 1e-5 on this model.
constexpr double kGradientRelTol = 1e-4;

const GoldenFile& Golden() { return GoldenData("golden_gradients.bin"); }
const gpt2::Model& Tiny(gpt2::TensorType type = gpt2::TensorType::kF32) { return TinyModel(type); }

std::vector<int> Ids(const std::string& name) {
  const std::vector<int32_t>& ids = Golden().I32(name);
  return std::vector<int>(ids.begin(), ids.end());
}

// Every reported gradient, by the golden's names ("embed", "ln_f", "blk0/q", ...).
std::map<std::string, std::vector<float>> RunBackward(gpt2::Backward& backward,
                                                      const gpt2::MetricSpec& spec) {
  std::map<std::string, std::vector<float>> grads;
  backward.Run(spec, [&](const gpt2::Activation& a) {
    const std::string key =
        a.layer >= 0 ? "blk" + std::to_string(a.layer) + "/" + a.name : std::string(a.name);
    int64_t n = 1;
    for (int d = 0; d < a.n_dims; ++d) n *= a.shape[d];
    grads[key].assign(a.data, a.data + n);
  });
  return grads;
}

// max |got - want| <= kGradientRelTol * max |want|, printed like llm.c's check_tensor.
void CheckGradient(const std::string& name, const std::vector<float>& got,
                   const GoldenTensor& want) {
  INFO(name);
  REQUIRE(int64_t(got.size()) == want.NumElements());
  double scale = 0.0;
  for (float v : want.f32) scale = std::max(scale, double(std::fabs(v)));
  REQUIRE(CheckTensor(name, got.data(), want.f32.data(), int64_t(got.size()),
                      kGradientRelTol * std::max(scale, 1e-6)));
}

TEST_CASE("gradients at every hook match PyTorch autograd, plain and intervened",
          "[gradients][golden]") {
  const gpt2::Model& model = Tiny();
  const std::vector<int> ids = Ids("ids");
  std::map<std::string, gpt2::Interventions> cases =
      InterventionCases(model, ids, Ids("patch_source_ids"));
  cases["plain"];
  cases["contrast"];
  gpt2::Session session(model);
  gpt2::Backward backward(model);
  for (const auto& entry : cases) {
    const std::string& name = entry.first;
    INFO("case " << name);
    const std::vector<int32_t>& q = Golden().I32("grad/" + name + "/query");
    const gpt2::MetricSpec spec{q[0], q[1], q[2]};
    backward.Forward(session, ids, entry.second.empty() ? nullptr : &entry.second);
    const double metric = backward.Metric(session, spec);
    const float want_metric = Golden().F32("grad/" + name + "/metric")[0];
    REQUIRE(std::fabs(metric - want_metric) <= 1e-4 * std::max(1.0f, std::fabs(want_metric)));
    const std::map<std::string, std::vector<float>> grads = RunBackward(backward, spec);
    int checked = 0;
    const std::string prefix = "grad/" + name + "/";
    for (const auto& g : Golden().tensors()) {
      if (g.first.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string hook = g.first.substr(prefix.size());
      if (hook == "query" || hook == "metric") continue;
      INFO("hook " << hook);
      REQUIRE(grads.count(hook) == 1);
      CheckGradient(g.first, grads.at(hook), g.second);
      ++checked;
    }
    REQUIRE(checked == 2 + 14 * model.config().n_layer);
  }
}

TEST_CASE("the backward of quantized weights is the f32 backward of their dequantized values",
          "[gradients]") {
  // Q8_0 and Q4_0 weights, int8 activations: the gradient multiplies the dequantized weights, so
  // it stays close to the f32 model's (the weights' own rounding apart); and it is finite.
  const std::vector<int> ids = Ids("ids");
  const gpt2::MetricSpec spec{static_cast<int>(ids.size()) - 1, 1332, -1};
  std::vector<float> want;
  {
    gpt2::Session session(Tiny());
    gpt2::Backward backward(Tiny());
    backward.Forward(session, ids, nullptr);
    want = RunBackward(backward, spec).at("embed");
  }
  double scale = 0.0;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  for (gpt2::TensorType type : {gpt2::TensorType::kQ8_0, gpt2::TensorType::kQ4_0}) {
    gpt2::Session session(Tiny(type));
    gpt2::Backward backward(Tiny(type), 2);
    backward.Forward(session, ids, nullptr);
    const std::vector<float> got = RunBackward(backward, spec).at("embed");
    double worst = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
      REQUIRE(std::isfinite(got[i]));
      worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
    }
    INFO("type " << static_cast<int>(type) << " worst " << worst << " of " << scale);
    // Q4_0's 4-bit weights move gradients by a few percent of their scale on this model.
    REQUIRE(worst <= (type == gpt2::TensorType::kQ8_0 ? 0.02 : 0.25) * scale);
  }
}

TEST_CASE("the backward keeps what the issue budgets and checks its arguments", "[gradients]") {
  const gpt2::Model& model = Tiny();
  const gpt2::Config& c = model.config();
  const std::vector<int> ids = Ids("ids");
  const int64_t T = static_cast<int64_t>(ids.size());
  gpt2::Session session(model);
  gpt2::Backward backward(model);
  REQUIRE_THROWS_AS(backward.Run({0, 1, -1}, [](const gpt2::Activation&) {}), gpt2::Error);
  backward.Forward(session, ids, nullptr);
  // Per token and block: resid_pre, q, k, v, resid_mid (5C), mlp_pre (F), T probabilities per
  // head; plus the embedding and the final stream.
  const int64_t floats = c.n_layer * T * (5 * c.n_embd + c.n_ff + c.n_head * T) + 2 * T * c.n_embd;
  REQUIRE(backward.SavedBytes() == floats * 4);
  // GPT-2 small by the same count at 128 tokens: within the 100 MB.
  const int64_t small = 12 * 128 * (5 * 768 + 3072 + 12 * 128) + 2 * 128 * 768;
  REQUIRE(small * 4 < 100 * 1000 * 1000);
  REQUIRE_THROWS_AS(backward.Run({int(T), 1, -1}, [](const gpt2::Activation&) {}), gpt2::Error);
  REQUIRE_THROWS_AS(backward.Run({0, c.n_vocab, -1}, [](const gpt2::Activation&) {}), gpt2::Error);
}

}  // namespace
}  // namespace gpt2_test
