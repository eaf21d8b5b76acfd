// Saliency and attribution patching (lab/gradients.h) against PyTorch autograd
// (scripts/make_golden.py write_gradients -> tests/data/golden_gradients.bin), integrated
// gradients' completeness, and attribution patching against exact activation patching.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "base/error.h"
#include "lab/gradients.h"
#include "lab/lab.h"
#include "model/backward.h"
#include "model/capture.h"
#include "../model/golden_file.h"
#include "../model/model_test_util.h"
#include "../test_paths.h"
#include "tools/common/synthetic_model.h"

namespace gpt2_test {
namespace {

// f32 against PyTorch's f32, relative to the largest value of each result (the bound).
constexpr double kRelTol = 1e-4;
// Attribution patching against exact patching of the stream entering each block at each
// position (24 cells of the golden pair): Pearson r = 0.80 observed; a first-order estimate on
// random weights, so the bound leaves room below it.
constexpr double kAtpCorrelationBound = 0.7;

const GoldenFile& Golden() {
  static const GoldenFile golden = GoldenFile::Load(DataPath("golden_gradients.bin"));
  return golden;
}

const gpt2::Model& Tiny() {
  static const std::unique_ptr<LoadedModel> m = LoadModelBytes(
      gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), gpt2::TensorType::kF32, nullptr));
  return *m->model;
}

std::vector<int> Ids(const std::string& name) {
  const std::vector<int32_t>& ids = Golden().I32(name);
  return std::vector<int>(ids.begin(), ids.end());
}

double MaxAbs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

void CheckValues(const std::vector<double>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  const double tol = kRelTol * std::max(MaxAbs(want), 1e-6);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("entry " << i << ": " << got[i] << " against " << want[i]);
    REQUIRE(std::fabs(got[i] - want[i]) <= tol);
  }
}

TEST_CASE("saliency (grad and ig) matches PyTorch autograd", "[gradients][golden]") {
  gpt2::Session session(Tiny());
  gpt2::Backward backward(Tiny());
  const std::vector<int> ids = Ids("ids");
  for (const char* method : {"grad", "ig"}) {
    INFO(method);
    gpt2::SaliencyRequest request;
    request.method = std::string(method) == "ig" ? gpt2::SaliencyMethod::kIntegrated
                                                 : gpt2::SaliencyMethod::kGradient;
    request.steps = 16;
    const gpt2::SaliencyResult r = gpt2::Saliency(session, backward, ids, request, nullptr);
    REQUIRE(r.position == static_cast<int>(ids.size()) - 1);
    REQUIRE(r.target == Golden().I32("atp/query")[0]);  // the most probable next token
    const std::string prefix = std::string("saliency/") + method + "/";
    CheckValues(r.values, Golden().F32(prefix + "values"));
    const std::vector<float>& td = Golden().F32(prefix + "total_delta");
    REQUIRE(std::fabs(r.total - td[0]) <= kRelTol * std::max(1.0, std::fabs(double(td[0]))));
    REQUIRE(std::fabs(r.delta - td[1]) <= kRelTol * std::max(1.0, std::fabs(double(td[1]))));
  }
}

TEST_CASE("integrated gradients are complete: total -> m(x) - m(0)", "[gradients]") {
  gpt2::Session session(Tiny());
  gpt2::Backward backward(Tiny());
  gpt2::SaliencyRequest request;
  request.method = gpt2::SaliencyMethod::kIntegrated;
  request.steps = 1024;
  // The golden prompt's first 6 tokens: 1024 forward and backward passes over them stay within a
  // few seconds in the sanitizer build (-O0).
  std::vector<int> ids = Ids("ids");
  ids.resize(6);
  const gpt2::SaliencyResult r = gpt2::Saliency(session, backward, ids, request, nullptr);
  INFO("total " << r.total << " delta " << r.delta);
  REQUIRE(std::fabs(r.delta) > 1e-3);
  REQUIRE(std::fabs(r.total - r.delta) <= 0.01 * std::fabs(r.delta));
}

TEST_CASE("attribution patching matches PyTorch autograd", "[gradients][golden]") {
  gpt2::Session session(Tiny());
  gpt2::Backward backward(Tiny());
  const gpt2::AtpResult r = gpt2::AttributionPatching(session, backward, Ids("ids"),
                                                      Ids("corrupt_ids"), -1, -1, nullptr);
  REQUIRE(r.target == Golden().I32("atp/query")[0]);
  CheckValues(r.heads, Golden().F32("atp/heads"));
  CheckValues(r.resid_pre, Golden().F32("atp/resid_pre"));
  const std::vector<float>& m = Golden().F32("atp/metrics");
  REQUIRE(std::fabs(r.metric_clean - m[0]) <= kRelTol * std::max(1.0f, std::fabs(m[0])));
  REQUIRE(std::fabs(r.metric_corrupt - m[1]) <= kRelTol * std::max(1.0f, std::fabs(m[1])));
}

TEST_CASE("attribution patching estimates what exact patching measures", "[gradients]") {
  // Exact: the clean run with the stream entering block l at position p replaced by the
  // corrupted run's, m(patched) - m(clean); the estimate is its first-order Taylor term.
  const gpt2::Model& model = Tiny();
  const gpt2::Config& c = model.config();
  const std::vector<int> clean = Ids("ids"), corrupt = Ids("corrupt_ids");
  const int T = static_cast<int>(clean.size());
  gpt2::Session session(model);
  gpt2::Backward backward(model);
  const gpt2::AtpResult r =
      gpt2::AttributionPatching(session, backward, clean, corrupt, -1, -1, nullptr);
  gpt2::Recorder bad;
  session.Reset();
  session.Prefill(corrupt.data(), T, {bad.Observer()});
  std::vector<double> exact, estimate;
  for (int l = 0; l < c.n_layer; ++l) {
    const gpt2::RecordedTensor* stream = l == 0 ? bad.Find("embed", -1) : bad.Find("resid_out", l - 1);
    REQUIRE(stream != nullptr);
    for (int p = 0; p < T; ++p) {
      gpt2::Interventions iv;
      iv.patches.push_back({l, p, std::vector<float>(stream->data.begin() + p * c.n_embd,
                                                     stream->data.begin() + (p + 1) * c.n_embd)});
      gpt2::RunOptions run;
      run.interventions = &iv;
      session.Reset();
      const float* logits = session.Prefill(clean.data(), T, run);
      exact.push_back(double(logits[r.target]) - r.metric_clean);
      estimate.push_back(r.resid_pre[size_t(l) * T + p]);
    }
  }
  const size_t n = exact.size();
  double me = 0, ma = 0;
  for (size_t i = 0; i < n; ++i) {
    me += exact[i] / n;
    ma += estimate[i] / n;
  }
  double see = 0, saa = 0, sea = 0;
  for (size_t i = 0; i < n; ++i) {
    see += (exact[i] - me) * (exact[i] - me);
    saa += (estimate[i] - ma) * (estimate[i] - ma);
    sea += (exact[i] - me) * (estimate[i] - ma);
  }
  const double correlation = sea / std::sqrt(see * saa);
  INFO("Pearson correlation of estimates and exact patches over " << n << " cells: " << correlation);
  REQUIRE(correlation > kAtpCorrelationBound);
}

TEST_CASE("attribution patching rejects prompts of different lengths", "[gradients]") {
  gpt2::Session session(Tiny());
  gpt2::Backward backward(Tiny());
  std::vector<int> shorter = Ids("corrupt_ids");
  shorter.pop_back();
  REQUIRE_THROWS_AS(
      gpt2::AttributionPatching(session, backward, Ids("ids"), shorter, -1, -1, nullptr),
      gpt2::Error);
}

TEST_CASE("the lab's gradient experiments give the conversation back", "[gradients][lab]") {
  std::vector<uint8_t> bytes =
      gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), gpt2::TensorType::kF32, nullptr);
  gpt2::LoadedGguf loaded;
  loaded.file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
  loaded.model = gpt2::Model::FromGguf(loaded.file);
  gpt2::Lab lab(std::move(loaded), 1);
  const std::vector<int> ids = Ids("ids");
  REQUIRE_THROWS_AS(lab.Saliency(gpt2::SaliencyRequest()), gpt2::Error);
  lab.SetCapture(true);
  lab.Run(ids);
  const std::vector<double> before = lab.LogProbs(5, {11, 318});

  gpt2::SaliencyRequest ig;
  ig.method = gpt2::SaliencyMethod::kIntegrated;
  const gpt2::SaliencyResult s = lab.Saliency(ig);
  CheckValues(s.values, Golden().F32("saliency/ig/values"));
  REQUIRE(lab.tokens() == ids);
  REQUIRE(lab.capture().n_positions() == static_cast<int>(ids.size()));
  REQUIRE(lab.LogProbs(5, {11, 318}) == before);

  const gpt2::AtpResult a = lab.AttributionPatching(ids, Ids("corrupt_ids"), -1, -1);
  CheckValues(a.resid_pre, Golden().F32("atp/resid_pre"));
  CheckValues(a.heads, Golden().F32("atp/heads"));
  REQUIRE(lab.tokens() == ids);
  REQUIRE(lab.LogProbs(5, {11, 318}) == before);
  std::vector<int> shorter = Ids("corrupt_ids");
  shorter.pop_back();
  REQUIRE_THROWS_AS(lab.AttributionPatching(ids, shorter, -1, -1), gpt2::Error);
  REQUIRE(lab.tokens() == ids);
}

}  // namespace
}  // namespace gpt2_test
