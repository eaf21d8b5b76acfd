// Path patching's interventions (src/model/run_options.h): head patches of a head's output or of
// its q, k or v, frozen attention, and a re-run that stops before the last block. Checked against
// scalar reasoning on the tiny F32 model (the projection and q.k / sqrt(D) written out here), a
// plain full run, and zero ablation's PyTorch logits (tests/data/golden_interventions.bin).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "golden_file.h"
#include "model/capture.h"
#include "model/session.h"
#include "model_test_util.h"

namespace gpt2_test {
namespace {

constexpr double kF32Tolerance = 1e-4;     // against PyTorch, as golden_test.cc
constexpr double kRerunTolerance = 1e-5;   // the same arithmetic in another call shape
constexpr double kScalarTolerance = 1e-4;  // a written-out sum against the kernels' order

const GoldenFile& Golden() { return GoldenData("golden_interventions.bin"); }

std::vector<int> CleanIds() {
  const std::vector<int32_t>& ids = Golden().I32("ids");
  return std::vector<int>(ids.begin(), ids.end());
}

// Another prompt of the same length: the "corrupted" run whose tensors are patched in.
std::vector<int> SourceIds() {
  std::vector<int> ids = CleanIds();
  ids[2] = 2068;
  ids[7] = 7586;
  ids[10] = 464;
  return ids;
}

struct Runs {
  const gpt2::Model& model = TinyModel();
  const gpt2::Config& c = model.config();
  const int C = c.n_embd, D = c.head_dim(), H = c.n_head, V = c.n_vocab;
  const std::vector<int> ids = CleanIds();
  const int T = static_cast<int>(ids.size());
  gpt2::Recorder clean, source;
  std::vector<float> clean_logits;

  Runs() {
    gpt2::Session a(model), b(model);
    const float* l = a.Prefill(ids.data(), T, {clean.Observer()});
    clean_logits.assign(l, l + V);
    const std::vector<int> other = SourceIds();
    b.Prefill(other.data(), T, {source.Observer()});
  }
  const std::vector<float>& Get(const gpt2::Recorder& r, const char* name, int layer) const {
    const gpt2::RecordedTensor* t = r.Find(name, layer);
    REQUIRE(t != nullptr);
    return t->data;
  }
  // Head h's rows [T, D] of an "attn_heads" [T, C] or a q/k/v [H, T, D] tensor.
  std::vector<float> HeadRows(const gpt2::Recorder& r, const char* name, int layer, int h) const {
    const std::vector<float>& t = Get(r, name, layer);
    std::vector<float> out;
    for (int p = 0; p < T; ++p) {
      const float* row = std::string(name) == "attn_heads" ? t.data() + size_t(p) * C + h * D
                                                           : t.data() + (size_t(h) * T + p) * D;
      out.insert(out.end(), row, row + D);
    }
    return out;
  }
};

TEST_CASE_METHOD(
    Runs, "a head output patch: zeros are zero ablation, the head's own values the plain run",
    "[path_patch][model]") {
  gpt2::Interventions zeros;
  for (gpt2::HeadRef h : {gpt2::HeadRef{0, 1}, gpt2::HeadRef{1, 3}}) {
    zeros.head_patches.push_back(
        {h.layer, h.head, gpt2::HeadPart::kOutput, 0, std::vector<float>(size_t(T) * D)});
  }
  gpt2::RunOptions run;
  run.interventions = &zeros;
  gpt2::Session s(model);
  const float* got = s.Prefill(ids.data(), T, run);
  CHECK(CheckTensor("zero head patches vs PyTorch's zero ablation", got,
                    Golden().F32("iv/ablate_zero/logits").data(), V, kF32Tolerance));

  gpt2::Interventions own;
  own.head_patches.push_back(
      {1, 2, gpt2::HeadPart::kOutput, 0, HeadRows(clean, "attn_heads", 1, 2)});
  run.interventions = &own;
  gpt2::Session s2(model);
  CHECK(CheckTensor("own values", s2.Prefill(ids.data(), T, run), clean_logits.data(), V,
                    kRerunTolerance));

  // A patch of some positions only changes those rows of the head's output.
  gpt2::Interventions part;
  std::vector<float> rows = HeadRows(source, "attn_heads", 0, 3);
  part.head_patches.push_back({0, 3, gpt2::HeadPart::kOutput, 4,
                               std::vector<float>(rows.begin() + 4 * D, rows.begin() + 7 * D)});
  gpt2::Recorder seen;
  run.interventions = &part;
  run.observer = seen.Observer();
  gpt2::Session s3(model);
  s3.Prefill(ids.data(), T, run);
  const std::vector<float> got_rows = HeadRows(seen, "attn_heads", 0, 3);
  const std::vector<float> clean_rows = HeadRows(clean, "attn_heads", 0, 3);
  for (int p = 0; p < T; ++p) {
    const std::vector<float>& want = p >= 4 && p < 7 ? rows : clean_rows;
    CHECK(
        std::equal(got_rows.begin() + p * D, got_rows.begin() + (p + 1) * D, want.begin() + p * D));
  }
}

TEST_CASE_METHOD(Runs,
                 "frozen attention projects the given heads, attends nothing and leaves the cache",
                 "[path_patch][model]") {
  const std::vector<float>& z = Get(source, "attn_heads", 1);
  gpt2::Interventions iv;
  iv.frozen_attn.push_back({1, 0, z, /*inputs=*/true});
  gpt2::RunOptions run;
  run.interventions = &iv;
  gpt2::Recorder seen;
  run.observer = seen.Observer();
  gpt2::Session s(model);
  s.Prefill(ids.data(), T, {});
  s.Rerun({0, T, 1}, Get(clean, "resid_out", 0).data(), run);

  // attn_out = z W_O^T + b, written out on the F32 weights ([C_out, C_in] rows).
  const gpt2::BlockWeights& w = model.blocks[1];
  REQUIRE(w.proj.type == gpt2::TensorType::kF32);
  const float* wo = static_cast<const float*>(w.proj.data);
  std::vector<float> want(size_t(T) * C);
  for (int p = 0; p < T; ++p) {
    for (int o = 0; o < C; ++o) {
      double sum = w.proj_b[o];
      for (int i = 0; i < C; ++i) sum += double(wo[size_t(o) * C + i]) * z[size_t(p) * C + i];
      want[size_t(p) * C + o] = float(sum);
    }
  }
  CHECK(CheckTensor("frozen block's attn_out", Get(seen, "attn_out", 1).data(), want.data(), T * C,
                    kScalarTolerance));
  CHECK(Get(seen, "attn_heads", 1) == z);
  // Nothing attended: no pattern; q, k and v for the observer are the clean run's (same stream).
  CHECK(seen.Find("attn_probs", 1) == nullptr);
  CHECK(seen.Find("attn_scores", 1) == nullptr);
  CHECK(CheckTensor("frozen block's k", Get(seen, "k", 1).data(), Get(clean, "k", 1).data(), T * C,
                    kRerunTolerance));
  // Not asked for its inputs, it computes none: nothing but its heads' output is reported there.
  iv.frozen_attn[0].inputs = false;
  gpt2::Recorder bare;
  run.observer = bare.Observer();
  s.Rerun({0, T, 1}, Get(clean, "resid_out", 0).data(), run);
  CHECK(bare.Find("ln1", 1) == nullptr);
  CHECK(bare.Find("k", 1) == nullptr);
  CHECK(Get(bare, "attn_heads", 1) == z);
  CHECK(CheckTensor("frozen block's attn_out, inputs not computed", Get(bare, "attn_out", 1).data(),
                    want.data(), T * C, kScalarTolerance));

  // The cache still holds the plain run's keys and values: one more token equals a plain run.
  const int next = 50256;
  const float* step = s.Step(next);
  std::vector<int> longer = ids;
  longer.push_back(next);
  gpt2::Session full(model);
  CHECK(CheckTensor("step after a frozen re-run", step, full.Prefill(longer.data(), T + 1), V,
                    kRerunTolerance));
}

TEST_CASE_METHOD(Runs, "frozen at the clean heads is the plain run; frozen rows run alone",
                 "[path_patch][model]") {
  gpt2::Interventions iv;
  for (int l = 0; l < c.n_layer; ++l) iv.frozen_attn.push_back({l, 0, Get(clean, "attn_heads", l)});
  gpt2::RunOptions run;
  run.interventions = &iv;
  gpt2::Session s(model);
  CHECK(CheckTensor("frozen at clean", s.Prefill(ids.data(), T, run), clean_logits.data(), V,
                    kRerunTolerance));

  // With every block from 1 frozen, positions no longer meet: the last row alone, given only
  // its own frozen rows, ends where it does among all rows.
  gpt2::Interventions late;
  late.frozen_attn.push_back({1, 0, Get(source, "attn_heads", 1)});
  late.head_patches.push_back(
      {1, 2, gpt2::HeadPart::kOutput, 0, HeadRows(clean, "attn_heads", 1, 2)});
  run.interventions = &late;
  gpt2::Session all(model), one(model);
  all.Prefill(ids.data(), T, {});
  one.Prefill(ids.data(), T, {});
  const float* last = all.Rerun({0, T, 1, true}, Get(clean, "resid_out", 0).data(), run);
  const std::vector<float> all_rows(last, last + C);
  gpt2::Interventions late_one;
  const std::vector<float>& z = Get(source, "attn_heads", 1);
  late_one.frozen_attn.push_back({1, T - 1, std::vector<float>(z.end() - C, z.end())});
  const std::vector<float> own = HeadRows(clean, "attn_heads", 1, 2);
  late_one.head_patches.push_back(
      {1, 2, gpt2::HeadPart::kOutput, T - 1, std::vector<float>(own.end() - D, own.end())});
  run.interventions = &late_one;
  const float* row =
      one.Rerun({T - 1, T, 1, true}, Get(clean, "resid_out", 0).data() + size_t(T - 1) * C, run);
  CHECK(CheckTensor("last row alone", row, all_rows.data(), C, kRerunTolerance));
  CHECK(late_one.FirstChangedBlock(c.n_layer) == 1);
}

TEST_CASE_METHOD(
    Runs, "q, k and v patches: scores and outputs from the patched values; the cache keeps them",
    "[path_patch][model]") {
  const std::vector<float> k_new = HeadRows(source, "k", 1, 2);
  const std::vector<float> v_new = HeadRows(source, "v", 1, 0);
  const std::vector<float> q_new = HeadRows(source, "q", 1, 3);
  gpt2::Interventions iv;
  iv.head_patches.push_back({1, 2, gpt2::HeadPart::kKey, 0, k_new});
  iv.head_patches.push_back({1, 0, gpt2::HeadPart::kValue, 0, v_new});
  iv.head_patches.push_back({1, 3, gpt2::HeadPart::kQuery, 0, q_new});
  gpt2::RunOptions run;
  run.interventions = &iv;
  gpt2::Recorder seen;
  run.observer = seen.Observer();
  gpt2::Session s(model);
  s.Prefill(ids.data(), T, run);
  CHECK(HeadRows(seen, "k", 1, 2) == k_new);
  CHECK(HeadRows(seen, "v", 1, 0) == v_new);
  CHECK(HeadRows(seen, "q", 1, 3) == q_new);
  // Scores q.k / sqrt(D) of heads 2 (patched keys) and 3 (patched queries), written out.
  const std::vector<float>& scores = Get(seen, "attn_scores", 1);  // [H, T, T]
  const std::vector<float> q2 = HeadRows(seen, "q", 1, 2), k3 = HeadRows(seen, "k", 1, 3);
  double worst = 0;
  for (int t = 0; t < T; ++t) {
    for (int j = 0; j <= t; ++j) {
      double s2 = 0, s3 = 0;
      for (int d = 0; d < D; ++d) {
        s2 += double(q2[t * D + d]) * k_new[j * D + d];
        s3 += double(q_new[t * D + d]) * k3[j * D + d];
      }
      worst = std::max(worst,
                       std::abs(s2 / std::sqrt(double(D)) - scores[(size_t(2) * T + t) * T + j]));
      worst = std::max(worst,
                       std::abs(s3 / std::sqrt(double(D)) - scores[(size_t(3) * T + t) * T + j]));
    }
  }
  CHECK(worst < kScalarTolerance);
  // Head 0's output: its pattern times the patched values.
  const std::vector<float>& probs = Get(seen, "attn_probs", 1);
  const std::vector<float> z0 = HeadRows(seen, "attn_heads", 1, 0);
  worst = 0;
  for (int t = 0; t < T; ++t) {
    for (int d = 0; d < D; ++d) {
      double sum = 0;
      for (int j = 0; j <= t; ++j) sum += double(probs[size_t(t) * T + j]) * v_new[j * D + d];
      worst = std::max(worst, std::abs(sum - z0[t * D + d]));
    }
  }
  CHECK(worst < kScalarTolerance);

  // A decode step reads the keys and values from the cache: with the patches held there it
  // equals one prefill of the longer prompt under the same patches (which cover positions
  // 0..T-1 only).
  run.observer = nullptr;
  const float* step = s.Step(50256, run);
  std::vector<int> longer = ids;
  longer.push_back(50256);
  gpt2::Session full(model);
  CHECK(CheckTensor("step over patched keys and values", step,
                    full.Prefill(longer.data(), T + 1, run), V, kRerunTolerance));
  gpt2::Session plain(model);
  CHECK(CompareTensors(step, plain.Prefill(longer.data(), T + 1), V).max_abs > 1e-3);
}

TEST_CASE_METHOD(Runs, "a re-run that ends early returns the stream leaving its last block",
                 "[path_patch][model]") {
  gpt2::Session s(model);
  s.Prefill(ids.data(), T, {});
  const float* row = s.Rerun({0, T, 0, true, 1}, Get(clean, "embed", -1).data(), {});
  CHECK(CheckTensor("stream after block 0", row,
                    Get(clean, "resid_out", 0).data() + size_t(T - 1) * C, C, kRerunTolerance));
  CHECK_THROWS_AS(s.Rerun({0, T, 1, true, 0}, Get(clean, "resid_out", 0).data(), {}), gpt2::Error);
  CHECK_THROWS_AS(s.Rerun({0, T, 0, true, 3}, Get(clean, "embed", -1).data(), {}), gpt2::Error);
}

TEST_CASE_METHOD(Runs, "head patches and frozen attention out of range are refused",
                 "[path_patch][model]") {
  auto refused = [&](const gpt2::Interventions& iv, const std::string& needle) {
    gpt2::RunOptions run;
    run.interventions = &iv;
    gpt2::Session s(model);
    try {
      s.Prefill(ids.data(), T, run);
      FAIL("accepted");
    } catch (const gpt2::Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
    CHECK(s.position() == 0);
  };
  const std::vector<float> rows(size_t(T) * D), frozen(size_t(T) * C);
  gpt2::Interventions iv;
  iv.head_patches.push_back({1, 4, gpt2::HeadPart::kKey, 0, rows});
  refused(iv, "valid heads are 0..3");
  iv.head_patches = {{2, 0, gpt2::HeadPart::kOutput, 0, rows}};
  refused(iv, "valid layers are 0..1");
  iv.head_patches = {{0, 0, gpt2::HeadPart::kQuery, 0, std::vector<float>(D + 1)}};
  refused(iv, "not whole rows of 16");
  iv.head_patches = {{0, 0, gpt2::HeadPart::kValue, 60, rows}};
  refused(iv, "valid positions are 0..63");
  iv.head_patches.clear();
  iv.frozen_attn = {{0, 0, frozen}, {0, 0, frozen}};
  refused(iv, "frozen twice");
  iv.frozen_attn = {{1, 1, std::vector<float>(size_t(T - 1) * C)}};
  refused(iv, "the run needs 0..11");
  iv.frozen_attn = {{1, 0, std::vector<float>(C - 1)}};
  refused(iv, "not whole rows of 64");
  // A re-run must have frozen rows for every row it runs, and may not start after them.
  gpt2::Session s(model);
  s.Prefill(ids.data(), T, {});
  iv.frozen_attn = {{1, T - 1, std::vector<float>(C)}};
  gpt2::RunOptions run;
  run.interventions = &iv;
  CHECK_THROWS_AS(s.Rerun({T - 2, T, 1, true}, Get(clean, "resid_out", 0).data(), run),
                  gpt2::Error);
  CHECK_NOTHROW(
      s.Rerun({T - 1, T, 1, true}, Get(clean, "resid_out", 0).data() + size_t(T - 1) * C, run));
  iv.frozen_attn.clear();
  iv.head_patches = {{0, 1, gpt2::HeadPart::kKey, 0, rows}};
  CHECK(iv.FirstChangedBlock(c.n_layer) == 0);
  CHECK_THROWS_AS(s.Rerun({0, T, 1, true}, Get(clean, "resid_out", 0).data(), run), gpt2::Error);
}

}  // namespace
}  // namespace gpt2_test
