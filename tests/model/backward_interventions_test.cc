// The backward pass through every intervention the forward supports, none treated as the
// identity: head patches (a head's output or q/k/v at some positions), frozen attention, SAE
// steering and clamping at every stream point, and all of them at once, against PyTorch autograd
// through the same interventions (scripts/make_golden.py write_gradient_cases, in
// tests/data/golden_gradients.bin): gradients at every hook, saliency (grad, ig), attribution
// patching and an attention score's gradient. Then every case, the older ones of
// intervention_cases.h too, against central finite differences of our own forward, which needs
// no reference; and what cannot be differentiated is refused by name.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../sae/sae_test_util.h"
#include "../test_paths.h"
#include "base/error.h"
#include "format/gguf.h"
#include "golden_file.h"
#include "intervention_cases.h"
#include "lab/gradients.h"
#include "model/backward.h"
#include "model/session.h"
#include "model_test_util.h"
#include "sae/sae.h"
#include "tools/common/synthetic_model.h"

namespace gpt2_test {
namespace {

// f32 against PyTorch's f32, relative to each tensor's largest value (the bound).
constexpr double kRelTol = 1e-4;

const GoldenFile& Golden() { return GoldenData("golden_gradients.bin"); }
const GoldenFile& SaeGolden() { return GoldenData("golden_sae.bin"); }
const gpt2::Model& Tiny() { return TinyModel(); }

std::vector<int> Ids(const std::string& name) {
  const std::vector<int32_t>& ids = Golden().I32(name);
  return std::vector<int>(ids.begin(), ids.end());
}

// The test SAE `name` (tests/data/sae/), converted to an f32 GGUF in memory and kept.
std::shared_ptr<const gpt2::Sae> TestSae(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const gpt2::Sae>> cache;
  std::shared_ptr<const gpt2::Sae>& slot = cache[name];
  if (!slot) {
    auto bytes = std::make_shared<std::vector<uint8_t>>(ConvertSae(name, gpt2::TensorType::kF32));
    std::unique_ptr<gpt2::GgufFile> parsed = gpt2::GgufFile::Parse(bytes->data(), bytes->size());
    std::shared_ptr<const gpt2::GgufFile> file(parsed.release(),
                                               [bytes](const gpt2::GgufFile* f) { delete f; });
    slot = std::make_shared<const gpt2::Sae>(std::move(file), Tiny().config().n_embd);
  }
  return slot;
}

// make_golden.py's SAE_STEER or SAE_CLAMP, as written in golden_sae.bin.
std::vector<std::pair<int, float>> SaePairs(const std::string& sae, const char* kind) {
  const std::vector<float>& v = SaeGolden().F32("sae/" + sae + "/" + kind);
  std::vector<std::pair<int, float>> pairs;
  for (size_t i = 0; i + 1 < v.size(); i += 2) pairs.push_back({static_cast<int>(v[i]), v[i + 1]});
  return pairs;
}

// make_golden.py's GRADIENT_SAE_CASES and GRADIENT_OTHER; the head patches and frozen blocks
// come from the golden file itself.
struct SaeEditCase {
  const char* sae;
  bool steer, clamp;
};
const std::map<std::string, std::vector<SaeEditCase>>& SaeCases() {
  static const std::map<std::string, std::vector<SaeEditCase>> cases = {
      {"sae_standard", {{"standard", true, true}}},
      {"sae_layer_norm", {{"layer_norm", true, true}}},
      {"sae_topk", {{"topk", false, true}}},
      {"sae_jumprelu", {{"jumprelu", false, true}}},
      {"sae_mlp_out", {{"mlp_out", true, true}}},
      {"everything", {{"layer_norm", true, true}}}};
  return cases;
}
const char* const kNewCases[] = {"patch_z",      "patch_q",      "patch_k",        "patch_v",
                                 "freeze",       "sae_standard", "sae_layer_norm", "sae_topk",
                                 "sae_jumprelu", "sae_mlp_out",  "everything"};

gpt2::Interventions GoldenCase(const std::string& name) {
  const gpt2::Config& c = Tiny().config();
  const int D = c.head_dim();
  gpt2::Interventions iv;
  const std::string prefix = "grad/" + name + "/";
  if (Golden().Has(prefix + "head_patches")) {
    const std::vector<int32_t>& p = Golden().I32(prefix + "head_patches");
    for (size_t i = 0; i < p.size() / 4; ++i) {
      static const gpt2::HeadPart kParts[] = {gpt2::HeadPart::kOutput, gpt2::HeadPart::kQuery,
                                              gpt2::HeadPart::kKey, gpt2::HeadPart::kValue};
      gpt2::HeadPatch patch{p[4 * i], p[4 * i + 1], kParts[p[4 * i + 2]], p[4 * i + 3],
                            Golden().F32(prefix + "head_patch/" + std::to_string(i))};
      REQUIRE(patch.values.size() % D == 0);
      iv.head_patches.push_back(std::move(patch));
    }
  }
  if (Golden().Has(prefix + "frozen")) {
    const std::vector<int32_t>& layers = Golden().I32(prefix + "frozen");
    for (size_t i = 0; i < layers.size(); ++i) {
      iv.frozen_attn.push_back(
          {layers[i], 0, Golden().F32(prefix + "frozen/" + std::to_string(i))});
    }
  }
  auto sae = SaeCases().find(name);
  if (sae != SaeCases().end()) {
    for (const SaeEditCase& e : sae->second) {
      iv.stream_edits.push_back(gpt2::Sae::Edit(
          TestSae(e.sae), e.steer ? SaePairs(e.sae, "steer") : std::vector<std::pair<int, float>>(),
          e.clamp ? SaePairs(e.sae, "clamp") : std::vector<std::pair<int, float>>()));
    }
  }
  if (name == "everything") {
    iv.skip_mlp = {0};
    iv.ablate_heads = {{1, 3}};
  }
  return iv;
}

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

double MaxAbs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

template <typename T>
void CheckValues(const std::string& name, const std::vector<T>& got,
                 const std::vector<float>& want) {
  INFO(name);
  REQUIRE(got.size() == want.size());
  const double tol = kRelTol * std::max(MaxAbs(want), 1e-6);
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("entry " << i << ": " << got[i] << " against " << want[i]);
    REQUIRE(std::fabs(double(got[i]) - want[i]) <= tol);
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
  }
}

TEST_CASE("gradients through head patches, frozen attention and SAE edits match PyTorch autograd",
          "[gradients][golden]") {
  const gpt2::Model& model = Tiny();
  const std::vector<int> ids = Ids("ids");
  gpt2::Session session(model);
  gpt2::Backward backward(model);
  for (const char* name : kNewCases) {
    INFO("case " << name);
    const gpt2::Interventions iv = GoldenCase(name);
    REQUIRE(!iv.empty());
    const std::string prefix = std::string("grad/") + name + "/";
    const std::vector<int32_t>& q = Golden().I32(prefix + "query");
    const gpt2::MetricSpec spec{q[0], q[1], q[2]};
    backward.Forward(session, ids, &iv);
    const double metric = backward.Metric(session, spec);
    const float want_metric = Golden().F32(prefix + "metric")[0];
    REQUIRE(std::fabs(metric - want_metric) <= kRelTol * std::max(1.0f, std::fabs(want_metric)));
    const std::map<std::string, std::vector<float>> grads = RunBackward(backward, spec);
    int checked = 0;
    for (const auto& g : Golden().tensors()) {
      if (g.first.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string hook = g.first.substr(prefix.size());
      if (hook == "query" || hook == "metric" || hook.compare(0, 4, "head") == 0 ||
          hook.compare(0, 6, "frozen") == 0) {
        continue;
      }
      INFO("hook " << hook);
      REQUIRE(grads.count(hook) == 1);
      CheckValues(g.first, grads.at(hook), g.second.f32);
      ++checked;
    }
    REQUIRE(checked == 2 + 14 * model.config().n_layer);
  }
}

TEST_CASE("saliency, attribution patching and a score's gradient under interventions match PyTorch",
          "[gradients][golden]") {
  const gpt2::Model& model = Tiny();
  const std::vector<int> ids = Ids("ids"), corrupt = Ids("corrupt_ids");
  gpt2::Session session(model);
  gpt2::Backward backward(model);
  for (const char* name : {"sae_layer_norm", "sae_standard", "patch_k", "freeze", "everything"}) {
    INFO("case " << name);
    const gpt2::Interventions iv = GoldenCase(name);
    for (const char* method : {"grad", "ig"}) {
      INFO(method);
      gpt2::SaliencyRequest request;
      request.method = std::string(method) == "ig" ? gpt2::SaliencyMethod::kIntegrated
                                                   : gpt2::SaliencyMethod::kGradient;
      request.steps = 16;
      request.target = Golden().I32("atp/query")[0];  // the plain model's most probable token
      const gpt2::SaliencyResult r = gpt2::Saliency(session, backward, ids, request, &iv);
      const std::string prefix = std::string("saliency/") + name + "/" + method + "/";
      CheckValues(prefix + "values", r.values, Golden().F32(prefix + "values"));
      const std::vector<float>& td = Golden().F32(prefix + "total_delta");
      REQUIRE(std::fabs(r.total - td[0]) <= kRelTol * std::max(1.0, std::fabs(double(td[0]))));
      REQUIRE(std::fabs(r.delta - td[1]) <= kRelTol * std::max(1.0, std::fabs(double(td[1]))));
    }
    const gpt2::AtpResult a = gpt2::AttributionPatching(session, backward, ids, corrupt,
                                                        Golden().I32("atp/query")[0], -1, &iv);
    const std::string prefix = std::string("atp/") + name + "/";
    CheckValues(prefix + "heads", a.heads, Golden().F32(prefix + "heads"));
    CheckValues(prefix + "resid_pre", a.resid_pre, Golden().F32(prefix + "resid_pre"));
    const std::vector<float>& m = Golden().F32(prefix + "metrics");
    REQUIRE(std::fabs(a.metric_clean - m[0]) <= kRelTol * std::max(1.0f, std::fabs(m[0])));
    REQUIRE(std::fabs(a.metric_corrupt - m[1]) <= kRelTol * std::max(1.0f, std::fabs(m[1])));
  }
  for (const char* name : {"patch_k", "sae_standard"}) {
    INFO("score case " << name);
    const gpt2::Interventions iv = GoldenCase(name);
    const std::string prefix = std::string("score/") + name + "/";
    const std::vector<int32_t>& q = Golden().I32(prefix + "query");
    const gpt2::ScoreSpec spec{q[0], q[1], q[2], q[3]};
    backward.Forward(session, ids, &iv);
    const float want = Golden().F32(prefix + "score")[0];
    REQUIRE(std::fabs(backward.Score(spec) - want) <= kRelTol * std::max(1.0f, std::fabs(want)));
    std::vector<float> embed;
    backward.RunScore(spec, [&](const gpt2::Activation& a) {
      if (a.layer < 0) embed.assign(a.data, a.data + a.shape[0] * a.shape[1]);
    });
    CheckValues(prefix + "embed", embed, Golden().F32(prefix + "embed"));
  }
}

TEST_CASE("every intervention's gradient equals central finite differences of the forward",
          "[gradients]") {
  // d/dh m(x + h v) at h = 0 along random directions v of the stream entering block 0, from our
  // own forward (Backward::Forward over resid_in, Metric), against g_embed . v: a check that
  // needs no reference and holds for any intervention the forward runs.
  const gpt2::Model& model = Tiny();
  const gpt2::Config& c = model.config();
  const std::vector<int> ids = Ids("ids");
  const int T = static_cast<int>(ids.size());
  std::map<std::string, gpt2::Interventions> cases =
      InterventionCases(model, ids, Ids("patch_source_ids"));
  for (const char* name : kNewCases) cases[name] = GoldenCase(name);
  cases["plain"];
  gpt2::Session session(model);
  gpt2::Backward backward(model);
  std::mt19937 rng(2026);
  std::normal_distribution<float> normal;
  for (const auto& entry : cases) {
    INFO("case " << entry.first);
    const gpt2::Interventions* iv = entry.second.empty() ? nullptr : &entry.second;
    backward.Forward(session, ids, iv);
    const gpt2::MetricSpec spec{T - 1, Golden().I32("atp/query")[0], 2068};
    const std::vector<float> x = backward.embed();
    std::vector<float> grad;
    backward.Run(spec, [&](const gpt2::Activation& a) {
      if (a.layer < 0 && std::string(a.name) == "embed")
        grad.assign(a.data, a.data + size_t(T) * c.n_embd);
    });
    double x_norm = 0.0;
    for (float v : x) x_norm += double(v) * v;
    x_norm = std::sqrt(x_norm);
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<float> v(x.size());
      double v_norm = 0.0;
      for (float& e : v) {
        e = normal(rng);
        v_norm += double(e) * e;
      }
      // Fourth-order central differences, m'(0) = (m(-2h) - 8 m(-h) + 8 m(h) - m(2h)) / 12h +
      // O(h^4), at a step of 3e-3 of the stream's size and at half that. Their disagreement
      // measures what the f32 forward's rounding and a ReLU of an SAE crossing zero inside the
      // steps do to the estimate; a wrong gradient is off at both steps alike.
      double analytic = 0.0;
      for (size_t i = 0; i < v.size(); ++i) analytic += double(grad[i]) * v[i];
      std::vector<float> shifted(x.size());
      const auto numeric_at = [&](double h) {
        const double steps[4] = {-2, -1, 1, 2}, weights[4] = {1, -8, 8, -1};
        double sum = 0.0;
        for (int k = 0; k < 4; ++k) {
          for (size_t i = 0; i < x.size(); ++i)
            shifted[i] = static_cast<float>(x[i] + steps[k] * h * v[i]);
          backward.Forward(session, ids, iv, shifted.data());
          sum += weights[k] * backward.Metric(session, spec);
        }
        return sum / (12 * h);
      };
      const double h = 3e-3 * x_norm / std::sqrt(v_norm);
      const double numeric = numeric_at(h), half = numeric_at(h / 2);
      const double noise = std::fabs(numeric - half);
      INFO("trial " << trial << ": analytic " << analytic << " numeric " << numeric << " (at h/2 "
                    << half << ")");
      REQUIRE(std::fabs(analytic - numeric) <= 0.01 * std::fabs(analytic) + 2 * noise + 1e-4);
    }
  }
}

TEST_CASE("what the backward cannot differentiate is refused by name", "[gradients]") {
  const gpt2::Model& model = Tiny();
  const std::vector<int> ids = Ids("ids");
  gpt2::Session session(model);
  gpt2::Backward backward(model);
  // A stream edit with no vector-Jacobian product (an observer-style edit written elsewhere).
  gpt2::Interventions iv;
  gpt2::StreamEdit edit;
  edit.layer = 1;
  edit.point = gpt2::StreamPoint::kResidMid;
  edit.edit = [](int, int rows, float* x) {
    x[0] *= 2.0f;
    (void)rows;
  };
  edit.name = "doubling of the first number";
  iv.stream_edits.push_back(edit);
  try {
    backward.Forward(session, ids, &iv);
    FAIL("the forward of an edit with no backward was accepted");
  } catch (const gpt2::Error& e) {
    REQUIRE(std::string(e.what()).find("doubling of the first number") != std::string::npos);
  }
  gpt2::SaliencyRequest request;
  REQUIRE_THROWS_AS(gpt2::Saliency(session, backward, ids, request, &iv), gpt2::Error);
  // A frozen block attends nothing: its scores do not exist.
  const gpt2::Interventions frozen = GoldenCase("freeze");
  backward.Forward(session, ids, &frozen);
  REQUIRE_THROWS_AS(backward.RunScore(gpt2::ScoreSpec{0, 1, 3, 1}, [](const gpt2::Activation&) {}),
                    gpt2::Error);
  // An SAE edit names itself.
  const gpt2::StreamEdit sae =
      gpt2::Sae::Edit(TestSae("standard"), {}, SaePairs("standard", "clamp"));
  REQUIRE(sae.backward);
  REQUIRE(sae.name.find("clamp of feature 5") != std::string::npos);
  REQUIRE(sae.name.find("blocks.1.hook_resid_pre") != std::string::npos);
}

}  // namespace
}  // namespace gpt2_test
