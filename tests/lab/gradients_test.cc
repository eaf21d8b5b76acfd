// Saliency and attribution patching (lab/gradients.h) against PyTorch autograd
// (scripts/make_golden.py write_gradients -> tests/data/golden_gradients.bin), integrated
// gradients' completeness, and attribution patching against exact activation patching.
#include "lab/gradients.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../model/golden_file.h"
#include "../model/intervention_cases.h"
#include "../model/model_test_util.h"
#include "../test_paths.h"
#include "base/error.h"
#include "lab/lab.h"
#include "model/backward.h"
#include "model/capture.h"
#include "tools/common/synthetic_model.h"

namespace gpt2_test {
namespace {

// f32 against PyTorch's f32, relative to the largest value of each result (the bound).
constexpr double kRelTol = 1e-4;
// Attribution patching against exact patching of the stream entering each block at each
// position (24 cells of the golden pair): Pearson r = 0.80 observed; a first-order estimate on
// random weights, so the bound leaves room below it.
constexpr double kAtpCorrelationBound = 0.7;

// The same for every head's output patched at every position (8 heads): r = 0.99 observed.
constexpr double kAtpHeadCorrelationBound = 0.9;

double Pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = a.size();
  double ma = 0, mb = 0;
  for (size_t i = 0; i < n; ++i) {
    ma += a[i] / n;
    mb += b[i] / n;
  }
  double saa = 0, sbb = 0, sab = 0;
  for (size_t i = 0; i < n; ++i) {
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
    sab += (a[i] - ma) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

const GoldenFile& Golden() { return GoldenData("golden_gradients.bin"); }
const gpt2::Model& Tiny() { return TinyModel(); }

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

TEST_CASE("an attention score's gradients and gradient x input match PyTorch autograd",
          "[gradients][golden]") {
  // The backward started at one score of block L (Backward::RunScore), plain and under
  // make_golden.py's SCORE_CASES' interventions.
  const gpt2::Model& model = Tiny();
  const gpt2::Config& c = model.config();
  const std::vector<int> ids = Ids("ids");
  const int T = static_cast<int>(ids.size());
  std::map<std::string, gpt2::Interventions> ivs =
      InterventionCases(model, ids, Ids("patch_source_ids"));
  gpt2::Session session(model);
  gpt2::Backward backward(model);
  for (const char* name : {"plain", "block0", "same", "patch", "combined", "post_norm"}) {
    INFO("case " << name);
    const std::string prefix = std::string("score/") + name + "/";
    const std::vector<int32_t>& q = Golden().I32(prefix + "query");
    const gpt2::ScoreSpec spec{q[0], q[1], q[2], q[3]};
    const gpt2::Interventions* iv = ivs.count(name) ? &ivs.at(name) : nullptr;
    REQUIRE((iv != nullptr) == (std::string(name) == "patch" || std::string(name) == "combined" ||
                                std::string(name) == "post_norm"));
    backward.Forward(session, ids, iv);
    const float want_score = Golden().F32(prefix + "score")[0];
    REQUIRE(std::fabs(backward.Score(spec) - want_score) <=
            kRelTol * std::max(1.0f, std::fabs(want_score)));
    std::map<std::string, std::vector<float>> grads;
    backward.RunScore(spec, [&](const gpt2::Activation& a) {
      const std::string key =
          a.layer >= 0 ? "blk" + std::to_string(a.layer) + "/" + a.name : a.name;
      int64_t n = 1;
      for (int d = 0; d < a.n_dims; ++d) n *= a.shape[d];
      grads[key].assign(a.data, a.data + n);
    });
    // Nothing after the score reaches it: neither later blocks nor ln_f are reported.
    REQUIRE(grads.count("ln_f") == 0);
    REQUIRE(grads.count("blk" + std::to_string(spec.layer) + "/resid_out") == 0);
    REQUIRE(grads.count("blk" + std::to_string(spec.layer) + "/attn_scores") == 1);
    const std::vector<float>& embed = Golden().F32(prefix + "embed");
    CheckValues(std::vector<double>(grads.at("embed").begin(), grads.at("embed").end()), embed);
    const std::vector<float>& resid = Golden().F32(prefix + "resid_pre");
    REQUIRE(resid.size() == size_t(spec.layer + 1) * T * c.n_embd);
    for (int l = 0; l <= spec.layer; ++l) {
      INFO("block " << l);
      const std::vector<float>& got = grads.at("blk" + std::to_string(l) + "/resid_pre");
      CheckValues(std::vector<double>(got.begin(), got.end()),
                  std::vector<float>(resid.begin() + size_t(l) * T * c.n_embd,
                                     resid.begin() + size_t(l + 1) * T * c.n_embd));
    }
    // value[p] = x[p] . ds/dx[p] cancels to ~0 where x[p] reaches the score only through
    // LayerNorms (block 0: ln_1 ignores the scale of its input), so its error scale is that of
    // the products, sum_d |x[p, d] ds/dx[p, d]|, not the values'.
    const std::vector<float> x = backward.embed();
    double products = 0.0;
    for (int p = 0; p < T; ++p) {
      double sum = 0.0;
      for (int64_t d = 0; d < c.n_embd; ++d)
        sum += std::fabs(double(x[p * c.n_embd + d]) * embed[p * c.n_embd + d]);
      products = std::max(products, sum);
    }
    const gpt2::ScoreSaliencyResult r = gpt2::ScoreSaliency(session, backward, ids, spec, iv);
    const std::vector<float>& values = Golden().F32(prefix + "values");
    REQUIRE(r.values.size() == values.size());
    for (size_t p = 0; p < values.size(); ++p) {
      INFO("value " << p << ": " << r.values[p] << " against " << values[p]);
      REQUIRE(std::fabs(r.values[p] - values[p]) <= kRelTol * products);
    }
    REQUIRE(std::fabs(r.score - want_score) <= kRelTol * std::max(1.0f, std::fabs(want_score)));
    for (int p = spec.query + 1; p < T; ++p) REQUIRE(r.values[p] == 0.0);
  }
}

TEST_CASE("an attention score's backward rejects what has no score", "[gradients]") {
  const gpt2::Model& model = Tiny();
  const std::vector<int> ids = Ids("ids");
  const int T = static_cast<int>(ids.size());
  gpt2::Session session(model);
  gpt2::Backward backward(model);
  const gpt2::ActivationObserver none = [](const gpt2::Activation&) {};
  REQUIRE_THROWS_AS(backward.RunScore(gpt2::ScoreSpec{0, 0, 0, 0}, none),
                    gpt2::Error);  // no forward yet
  backward.Forward(session, ids, nullptr);
  for (const gpt2::ScoreSpec& bad :
       {gpt2::ScoreSpec{-1, 0, 3, 1}, gpt2::ScoreSpec{model.config().n_layer, 0, 3, 1},
        gpt2::ScoreSpec{0, model.config().n_head, 3, 1}, gpt2::ScoreSpec{0, 0, T, 1},
        gpt2::ScoreSpec{0, 0, 3, 4}, gpt2::ScoreSpec{0, 0, 3, -1}}) {
    REQUIRE_THROWS_AS(backward.RunScore(bad, none), gpt2::Error);
    REQUIRE_THROWS_AS(backward.Score(bad), gpt2::Error);
  }
  gpt2::Interventions skip;
  skip.skip_attn = {1};
  REQUIRE_THROWS_AS(gpt2::ScoreSaliency(session, backward, ids, gpt2::ScoreSpec{1, 0, 3, 1}, &skip),
                    gpt2::Error);
}

TEST_CASE("integrated gradients' m(0) from one position equals the whole prompt's", "[gradients]") {
  // Saliency takes m(0) from a one-token run (every position computes the same from zeros); a
  // full run of zeros over every position is the reference, plain and under interventions
  // that act alike on every position.
  const gpt2::Model& model = Tiny();
  const std::vector<int> ids = Ids("ids");
  const int T = static_cast<int>(ids.size());
  std::map<std::string, gpt2::Interventions> ivs =
      InterventionCases(model, ids, Ids("patch_source_ids"));
  gpt2::Session session(model);
  gpt2::Backward backward(model);
  for (const char* name : {"plain", "ablate_mean", "post_norm", "combined", "patch"}) {
    INFO("case " << name);
    const gpt2::Interventions* iv = ivs.count(name) ? &ivs.at(name) : nullptr;
    gpt2::SaliencyRequest request;
    request.method = gpt2::SaliencyMethod::kIntegrated;
    request.steps = 2;
    request.position = T - 3;
    request.contrast = 2068;
    const gpt2::SaliencyResult r = gpt2::Saliency(session, backward, ids, request, iv);
    const std::vector<float> zeros(size_t(T) * model.config().n_embd, 0.0f);
    backward.Forward(session, ids, iv, zeros.data());
    const double m0 = backward.Metric(session, gpt2::MetricSpec{r.position, r.target, r.contrast});
    REQUIRE(std::fabs((r.metric - r.delta) - m0) <= 1e-5 * std::max(1.0, std::fabs(m0)));
  }
}

TEST_CASE("attribution patching matches PyTorch autograd", "[gradients][golden]") {
  gpt2::Session session(Tiny());
  gpt2::Backward backward(Tiny());
  const gpt2::AtpResult r =
      gpt2::AttributionPatching(session, backward, Ids("ids"), Ids("corrupt_ids"), -1, -1, nullptr);
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
    const gpt2::RecordedTensor* stream =
        l == 0 ? bad.Find("embed", -1) : bad.Find("resid_out", l - 1);
    REQUIRE(stream != nullptr);
    for (int p = 0; p < T; ++p) {
      gpt2::Interventions iv;
      iv.patches.push_back({l, p,
                            std::vector<float>(stream->data.begin() + p * c.n_embd,
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
  INFO("Pearson correlation of estimates and exact patches over " << n
                                                                  << " cells: " << correlation);
  REQUIRE(correlation > kAtpCorrelationBound);
}

TEST_CASE("an attribution patching cell run exactly matches PyTorch", "[gradients][golden]") {
  gpt2::Session session(Tiny());
  const std::vector<int> clean = Ids("ids"), corrupt = Ids("corrupt_ids");
  for (const char* name : {"head0", "head1", "resid0", "resid1"}) {
    INFO("case " << name);
    const std::vector<int32_t>& q = Golden().I32(std::string("exact/") + name + "/query");
    const gpt2::AtpCell cell = q[0] == 0 ? gpt2::AtpCell::kHead : gpt2::AtpCell::kResidPre;
    const gpt2::ExactPatchResult r =
        gpt2::ExactPatch(session, clean, corrupt, cell, q[1], q[2], -1, q[4], nullptr);
    REQUIRE(r.target == q[3]);
    const std::vector<float>& want = Golden().F32(std::string("exact/") + name + "/values");
    const double scale = std::max(1.0, std::fabs(double(want[1])));
    REQUIRE(std::fabs(r.value - want[0]) <= kRelTol * scale);
    REQUIRE(std::fabs(r.metric_clean - want[1]) <= kRelTol * scale);
    REQUIRE(std::fabs(r.metric_patched - want[2]) <= kRelTol * scale);
  }
  REQUIRE_THROWS_AS(
      gpt2::ExactPatch(session, clean, corrupt, gpt2::AtpCell::kHead, 0, 4, -1, -1, nullptr),
      gpt2::Error);
  REQUIRE_THROWS_AS(
      gpt2::ExactPatch(session, clean, corrupt, gpt2::AtpCell::kResidPre, 2, 0, -1, -1, nullptr),
      gpt2::Error);
  REQUIRE_THROWS_AS(
      gpt2::ExactPatch(session, clean, corrupt, gpt2::AtpCell::kResidPre, 0, 12, -1, -1, nullptr),
      gpt2::Error);
  std::vector<int> shorter = corrupt;
  shorter.pop_back();
  REQUIRE_THROWS_AS(
      gpt2::ExactPatch(session, clean, shorter, gpt2::AtpCell::kHead, 0, 0, -1, -1, nullptr),
      gpt2::Error);
}

TEST_CASE("attribution patching's head estimates track the exact head patches", "[gradients]") {
  // Every head's corrupted output patched into the clean run (ExactPatch, checked against
  // PyTorch above) against its first-order estimate.
  const gpt2::Model& model = Tiny();
  const gpt2::Config& c = model.config();
  const std::vector<int> clean = Ids("ids"), corrupt = Ids("corrupt_ids");
  gpt2::Session session(model);
  gpt2::Backward backward(model);
  const gpt2::AtpResult r =
      gpt2::AttributionPatching(session, backward, clean, corrupt, -1, -1, nullptr);
  std::vector<double> exact, estimate;
  for (int l = 0; l < c.n_layer; ++l) {
    for (int h = 0; h < c.n_head; ++h) {
      exact.push_back(gpt2::ExactPatch(session, clean, corrupt, gpt2::AtpCell::kHead, l, h,
                                       r.target, -1, nullptr)
                          .value);
      estimate.push_back(r.heads[size_t(l) * c.n_head + h]);
    }
  }
  const double correlation = Pearson(exact, estimate);
  INFO("Pearson correlation of head estimates and exact head patches: " << correlation);
  REQUIRE(correlation > kAtpHeadCorrelationBound);
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

  const std::vector<int32_t>& q = Golden().I32("score/plain/query");
  const gpt2::ScoreSaliencyResult why = lab.ScoreSaliency(gpt2::ScoreSpec{q[0], q[1], q[2], q[3]});
  CheckValues(why.values, Golden().F32("score/plain/values"));
  REQUIRE(lab.tokens() == ids);
  REQUIRE(lab.LogProbs(5, {11, 318}) == before);
  REQUIRE_THROWS_AS(lab.ScoreSaliency(gpt2::ScoreSpec{q[0], q[1], 3, 4}), gpt2::Error);
  REQUIRE(lab.tokens() == ids);

  const std::vector<int32_t>& e = Golden().I32("exact/head1/query");
  const gpt2::ExactPatchResult exact =
      lab.ExactPatch(ids, Ids("corrupt_ids"), gpt2::AtpCell::kHead, e[1], e[2], -1, e[4]);
  REQUIRE(std::fabs(exact.value - Golden().F32("exact/head1/values")[0]) <=
          kRelTol * std::max(1.0f, std::fabs(Golden().F32("exact/head1/values")[1])));
  REQUIRE(lab.tokens() == ids);
  REQUIRE(lab.LogProbs(5, {11, 318}) == before);
}

}  // namespace
}  // namespace gpt2_test
