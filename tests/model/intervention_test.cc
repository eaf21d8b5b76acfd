// Interventions (src/model/run_options.h) and direct logit attribution (model/attribution.h)
// against PyTorch: scripts/make_golden.py applies the same interventions to the same tiny
// synthetic model and writes tests/data/golden_interventions.bin. Also: an intervened re-run that
// reuses the KV cache equals a full intervened run, and decoding keeps the interventions.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "golden_file.h"
#include "intervention_cases.h"
#include "model/attribution.h"
#include "model/capture.h"
#include "model/session.h"
#include "model_test_util.h"
#include "tools/cli/args.h"
#include "tools/common/intervention_flags.h"

namespace gpt2_test {
namespace {

// f32 against PyTorch's f32, as golden_test.cc.
constexpr double kF32Tolerance = 1e-4;
// A re-run reusing the cache does the same arithmetic in the same order as a full run.
constexpr double kRerunTolerance = 1e-5;

const GoldenFile& Golden() { return GoldenData("golden_interventions.bin"); }

std::vector<int> Ids(const std::string& name) {
  const std::vector<int32_t>& ids = Golden().I32(name);
  return std::vector<int>(ids.begin(), ids.end());
}

// The clean run of the golden prompt, observed.
const gpt2::Recorder& CleanRun() {
  static const gpt2::Recorder* recorder = [] {
    auto* r = new gpt2::Recorder();
    gpt2::Session session(TinyModel());
    const std::vector<int> ids = Ids("ids");
    session.Prefill(ids.data(), static_cast<int>(ids.size()), {r->Observer()});
    return r;
  }();
  return *recorder;
}

// The cases of make_golden.py's intervention_cases(), built from our own runs.
std::map<std::string, gpt2::Interventions> Cases() {
  return InterventionCases(TinyModel(), Ids("ids"), Ids("patch_source_ids"));
}

TEST_CASE("each intervention's logits match PyTorch's", "[model][interventions]") {
  const gpt2::Model& model = TinyModel();
  const std::vector<int> ids = Ids("ids");
  const int T = static_cast<int>(ids.size()), V = model.config().n_vocab;
  for (const auto& entry : Cases()) {
    const std::string& name = entry.first;
    SECTION(name) {
      std::printf("-- intervention %s vs PyTorch\n", name.c_str());
      gpt2::Session session(model);
      gpt2::Recorder recorder;
      gpt2::RunOptions run;
      run.observer = recorder.Observer();
      run.interventions = &entry.second;
      const float* logits = session.Prefill(ids.data(), T, run);
      const std::vector<float>& want = Golden().F32("iv/" + name + "/logits");
      REQUIRE(want.size() == static_cast<size_t>(V));
      CHECK(CheckTensor(name + " last logits", logits, want.data(), V, kF32Tolerance));
      for (int l = 0; l < model.config().n_layer; ++l) {
        const std::string key = "iv/" + name + "/blk" + std::to_string(l) + "/resid_out";
        const gpt2::RecordedTensor* r = recorder.Find("resid_out", l);
        REQUIRE(r != nullptr);
        REQUIRE(r->data.size() == Golden().F32(key).size());
        CHECK(CheckTensor(key, r->data.data(), Golden().F32(key).data(),
                          static_cast<int64_t>(r->data.size()), kF32Tolerance));
      }
      // The interventions really change the model (a no-op would pass the checks above only if
      // make_golden.py ignored them too).
      const gpt2::RecordedTensor* clean = CleanRun().Find("logits", -1);
      CHECK(CompareTensors(clean->data.data() + size_t(T - 1) * V, want.data(), V).max_abs > 1e-3);
    }
  }
}

TEST_CASE("an intervened re-run reusing the cache equals a full intervened run",
          "[model][interventions]") {
  const gpt2::Model& model = TinyModel();
  const int L = model.config().n_layer, C = model.config().n_embd, V = model.config().n_vocab;
  const std::vector<int> ids = Ids("ids");
  const int T = static_cast<int>(ids.size());
  for (const auto& entry : Cases()) {
    const gpt2::Interventions& iv = entry.second;
    INFO(entry.first);
    const int first = iv.FirstChangedBlock(L);
    REQUIRE(first < L);
    gpt2::RunOptions run;
    run.interventions = &iv;

    gpt2::Session full(model);
    const float* l_full = full.Prefill(ids.data(), T, run);
    const std::vector<float> want(l_full, l_full + V);

    // A clean run, then the same positions again from the first changed block, fed the stream
    // entering it as the clean run observed it.
    gpt2::Session session(model);
    gpt2::Recorder clean;
    session.Prefill(ids.data(), T, {clean.Observer()});
    const gpt2::RecordedTensor* resid =
        first == 0 ? clean.Find("embed", -1) : clean.Find("resid_out", first - 1);
    REQUIRE(resid != nullptr);
    REQUIRE(resid->data.size() == size_t(T) * C);
    gpt2::Recorder rerun_seen;
    run.observer = rerun_seen.Observer();
    const float* l_rerun = session.Rerun({0, T, first}, resid->data.data(), run);
    CHECK(session.position() == T);
    CHECK(CheckTensor(entry.first + " re-run from block " + std::to_string(first), l_rerun,
                      want.data(), V, kRerunTolerance));
    // Only the blocks from `first` on ran again.
    CHECK(rerun_seen.Find("embed", -1) == nullptr);
    CHECK((first == 0 || rerun_seen.Find("resid_out", first - 1) == nullptr));
    CHECK(rerun_seen.Find("resid_out", L - 1) != nullptr);

    // Decoding after the re-run uses the intervened cache of every block: one more token equals
    // a full intervened run of the longer prompt.
    run.observer = nullptr;
    const float* l_next = session.Step(50256, run);
    std::vector<int> longer = ids;
    longer.push_back(50256);
    gpt2::Session full_longer(model);
    const float* l_want = full_longer.Prefill(longer.data(), T + 1, run);
    CHECK(CheckTensor(entry.first + " step after re-run", l_next, l_want, V, kRerunTolerance));
  }
}

// log_softmax in long double, the test's own reference for LogProbability.
double ReferenceLogProb(const float* logits, int n, int id) {
  long double max = logits[0], sum = 0;
  for (int i = 1; i < n; ++i) max = std::max<long double>(max, logits[i]);
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<long double>(logits[i]) - max);
  return static_cast<double>(logits[id] - max - std::log(sum));
}

// The tiny model's prompt prefilled once with every activation recorded: the clean run that
// the re-run and probe tests start from.
struct CleanRun {
  const gpt2::Model& model = TinyModel();
  const int C = model.config().n_embd, V = model.config().n_vocab;
  const std::vector<int> ids = Ids("ids");
  const int T = static_cast<int>(ids.size());
  gpt2::Session session{model};
  gpt2::Recorder clean;
  const gpt2::RecordedTensor* resid = nullptr;  // block 0's output stream

  CleanRun() {
    session.Prefill(ids.data(), T, {clean.Observer()});
    resid = clean.Find("resid_out", 0);
    REQUIRE(resid != nullptr);
    REQUIRE(resid->data.size() == size_t(T) * C);
  }
};

TEST_CASE_METHOD(CleanRun,
                 "a re-run of some positions (heads sweep, patching probes) equals a full run",
                 "[model][interventions]") {
  REQUIRE(T > 3);
  gpt2::Interventions iv;
  iv.ablate_heads = {{1, 3}};
  gpt2::RunOptions run;
  run.interventions = &iv;
  for (int n : {1, T - 3, T}) {
    INFO("prefix of " << n);
    const float* got = session.Rerun({0, n, 1}, resid->data.data(), run);
    CHECK(session.position() == T);
    gpt2::Session full(model);
    const float* want = full.Prefill(ids.data(), n, run);
    CHECK(CheckTensor("prefix of " + std::to_string(n), got, want, V, kRerunTolerance));
  }
  // The whole prompt's probe against PyTorch's logits with the same head zeroed.
  gpt2::Interventions two;
  two.ablate_heads = {{0, 1}, {1, 3}};
  run.interventions = &two;
  const float* l0 = session.Rerun({0, T, 0}, clean.Find("embed", -1)->data.data(), run);
  const std::vector<float>& want = Golden().F32("iv/ablate_zero/logits");
  CHECK(CheckTensor("prefix of the whole prompt, ablate_zero", l0, want.data(), V, kF32Tolerance));
  for (int id : {0, 50256, 464}) {
    CHECK(gpt2::LogProbability(l0, V, id) ==
          Approx(ReferenceLogProb(want.data(), V, id)).margin(1e-4));
    CHECK(gpt2::LogProbability(l0, V, id) == Approx(ReferenceLogProb(l0, V, id)).margin(1e-9));
  }
  CHECK_THROWS_AS(session.Rerun({0, T + 1, 1}, resid->data.data(), run), gpt2::Error);
  CHECK_THROWS_AS(session.Rerun({2, 2, 1}, resid->data.data(), run), gpt2::Error);
  CHECK(session.position() == T);

  // A patch at position p changes only positions p..: re-running those from the patched block
  // equals a full patched run (the rows before p keep the first run's cache).
  const gpt2::Interventions patch = Cases().at("patch");
  run.interventions = &patch;
  const int p = patch.patches[0].position;
  session.Rerun({0, T, 0}, clean.Find("embed", -1)->data.data(),
                gpt2::RunOptions());  // plain again
  const float* got = session.Rerun({p, T, 1}, resid->data.data() + size_t(p) * C, run);
  const std::vector<float>& want_patch = Golden().F32("iv/patch/logits");
  CHECK(CheckTensor("patch re-run of positions p..", got, want_patch.data(), V, kF32Tolerance));
}

TEST_CASE_METHOD(
    CleanRun,
    "probes to the final stream, unembedded together, equal PyTorch; the cache they leave runs on",
    "[model][interventions]") {
  const float* embed = clean.Find("embed", -1)->data.data();
  // Two probes' final rows (the last block runs its MLP for the last row only), then one
  // FinalLogits call for both.
  gpt2::Interventions two;
  two.ablate_heads = {{0, 1}, {1, 3}};
  const gpt2::Interventions patch = Cases().at("patch");
  const int p = patch.patches[0].position;
  std::vector<float> rows(2 * size_t(C)), logits(2 * size_t(V));
  gpt2::RunOptions run;
  run.interventions = &two;
  std::copy_n(session.Rerun({0, T, 0, true}, embed, run), C, rows.data());
  run.interventions = &patch;
  session.Rerun({0, T, 0, true}, embed, gpt2::RunOptions());  // plain again
  std::copy_n(session.Rerun({p, T, 1, true}, resid->data.data() + size_t(p) * C, run), C,
              rows.data() + C);
  CHECK(session.position() == T);
  session.FinalLogits(rows.data(), 2, logits.data());
  CHECK(CheckTensor("ablate_zero, unembedded with another row", logits.data(),
                    Golden().F32("iv/ablate_zero/logits").data(), V, kF32Tolerance));
  CHECK(CheckTensor("patch, unembedded with another row", logits.data() + V,
                    Golden().F32("iv/patch/logits").data(), V, kF32Tolerance));
  // The last block's rows before the last skipped its MLP but kept their keys and values: after
  // a plain probe over every position the conversation goes on as after a plain prefill.
  session.Rerun({0, T, 0, true}, embed, gpt2::RunOptions());
  const int next = 50256;
  const float* got = session.Step(next);
  std::vector<int> longer = ids;
  longer.push_back(next);
  gpt2::Session full(model);
  CHECK(CheckTensor("step after probes", got, full.Prefill(longer.data(), T + 1), V,
                    kRerunTolerance));
}

TEST_CASE("per-block times: every block run gets a positive time, the others keep theirs",
          "[model][interventions]") {
  const gpt2::Model& model = TinyModel();
  const int L = model.config().n_layer;
  const std::vector<int> ids = Ids("ids");
  const int T = static_cast<int>(ids.size());
  gpt2::Session session(model);
  gpt2::Recorder clean;
  std::vector<double> ms;
  gpt2::RunOptions run;
  run.observer = clean.Observer();
  run.block_ms = &ms;
  session.Prefill(ids.data(), T, run);
  REQUIRE(ms.size() == size_t(L));
  for (double t : ms) CHECK(t > 0);
  // A re-run from the last block times only that block.
  ms.assign(L, -1.0);
  run.observer = nullptr;
  session.Rerun({0, T, L - 1}, clean.Find("resid_out", L - 2)->data.data(), run);
  CHECK(ms[L - 1] > 0);
  for (int l = 0; l < L - 1; ++l) CHECK(ms[l] == -1.0);
}

TEST_CASE("interventions hold in decode steps as in one prefill", "[model][interventions]") {
  const gpt2::Model& model = TinyModel();
  const int V = model.config().n_vocab;
  const std::vector<int> ids = Ids("ids");
  const int T = static_cast<int>(ids.size());
  for (const char* name : {"ablate_zero", "post_norm", "combined"}) {
    INFO(name);
    const gpt2::Interventions iv = Cases().at(name);
    gpt2::RunOptions run;
    run.interventions = &iv;
    gpt2::Session session(model);
    session.Prefill(ids.data(), 5, run);
    const float* logits = nullptr;
    for (int t = 5; t < T; ++t) logits = session.Step(ids[t], run);
    CHECK(CheckTensor(std::string(name) + " stepwise", logits,
                      Golden().F32("iv/" + std::string(name) + "/logits").data(), V,
                      kF32Tolerance));
  }
}

TEST_CASE("interventions out of range are refused with the valid range", "[model][interventions]") {
  const gpt2::Model& model = TinyModel();
  gpt2::Session session(model);
  const int ids[] = {464, 2068};
  auto refused = [&](const gpt2::Interventions& iv, const std::string& needle) {
    gpt2::RunOptions run;
    run.interventions = &iv;
    try {
      session.Prefill(ids, 2, run);
      FAIL("accepted");
    } catch (const gpt2::Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
    CHECK(session.position() == 0);
  };
  gpt2::Interventions iv;
  iv.skip_attn = {2};
  refused(iv, "valid layers are 0..1");
  iv = gpt2::Interventions();
  iv.ablate_heads = {{1, 4}};
  refused(iv, "valid heads are 0..3");
  iv = gpt2::Interventions();
  iv.no_residual = {-1};
  refused(iv, "valid layers are 0..1");
  iv = gpt2::Interventions();
  iv.ablate_heads = {{0, 0}};
  iv.head_means.assign(3, 0.0f);
  refused(iv, "head means");
  iv = gpt2::Interventions();
  iv.patches.push_back({0, 64, std::vector<float>(64)});
  refused(iv, "valid positions are 0..63");

  // A re-run may not start after a block the interventions change.
  session.Prefill(ids, 2);
  std::vector<float> resid(2 * 64, 0.0f);
  iv = gpt2::Interventions();
  iv.skip_mlp = {0};
  gpt2::RunOptions run;
  run.interventions = &iv;
  CHECK_THROWS_AS(session.Rerun({0, 2, 1}, resid.data(), run), gpt2::Error);
  CHECK_THROWS_AS(session.Rerun({0, 3, 0}, resid.data(), run), gpt2::Error);
  CHECK(session.position() == 2);
}

TEST_CASE("the CLI's intervention flags parse and name the valid range", "[model][interventions]") {
  const gpt2::Config& c = TinyModel().config();
  auto parse = [&](std::vector<std::string> words) {
    std::vector<char*> argv = {const_cast<char*>("gpt2"), const_cast<char*>("generate")};
    for (std::string& w : words) argv.push_back(&w[0]);
    std::set<std::string> known(std::begin(gpt2::kInterventionFlags),
                                std::end(gpt2::kInterventionFlags));
    const gpt2::Args args(static_cast<int>(argv.size()), argv.data(), 2, known, {"post-norm"});
    return gpt2::InterventionsFromArgs(args, c);
  };
  const gpt2::Interventions iv = parse({"--ablate-heads", "0.1,1.3", "--skip-attn", "1",
                                        "--skip-mlp", "0,1", "--no-residual", "0", "--post-norm"});
  REQUIRE(iv.ablate_heads.size() == 2);
  CHECK(iv.ablate_heads[1].layer == 1);
  CHECK(iv.ablate_heads[1].head == 3);
  CHECK(iv.skip_attn == std::vector<int>{1});
  CHECK(iv.skip_mlp == std::vector<int>{0, 1});
  CHECK(iv.no_residual == std::vector<int>{0});
  CHECK(iv.post_norm);
  CHECK(parse({}).empty());
  auto message = [&](std::vector<std::string> words) -> std::string {
    try {
      parse(words);
    } catch (const gpt2::UsageError& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(message({"--skip-attn", "2"}) ==
        "--skip-attn: layer 2 is out of range; valid layers are 0..1");
  CHECK(message({"--ablate-heads", "1.4"}) ==
        "--ablate-heads: head 4 is out of range; valid heads are 0..3");
  CHECK(message({"--ablate-heads", "3"}).find("LAYER.HEAD") != std::string::npos);
  CHECK(message({"--no-residual", "0,x"}) == "--no-residual: 'x' is not a layer number");
  CHECK(message({"--skip-mlp", "-1"}) == "--skip-mlp: '-1' is not a layer number");
}

TEST_CASE("direct logit attribution matches PyTorch and sums to the logit",
          "[model][attribution]") {
  const gpt2::Model& model = TinyModel();
  const gpt2::Config& c = model.config();
  const std::vector<int> ids = Ids("ids");
  std::map<std::string, gpt2::Interventions> interventions;
  interventions["ablated"].ablate_heads = {{0, 1}};
  interventions["ablated"].skip_mlp = {0};
  interventions["ablated"].skip_attn = {1};
  for (const char* name : {"last", "contrast", "ablated"}) {
    SECTION(name) {
      const std::vector<int32_t>& query = Golden().I32(std::string("attr/") + name + "/query");
      const std::vector<float>& want = Golden().F32(std::string("attr/") + name + "/values");
      gpt2::AttributionRequest request;
      request.position = query[0];
      request.contrast = query[2];
      // "last" asks for the defaults (last position, most probable token); make_golden.py
      // wrote what they resolve to.
      if (std::string(name) == "last")
        request.position = -1;
      else
        request.target = query[1];
      auto it = interventions.find(name);
      if (it != interventions.end()) request.interventions = &it->second;
      gpt2::Session session(model);
      const gpt2::Attribution a = gpt2::AttributeLogit(session, ids, request);
      CHECK(a.position == query[0]);
      CHECK(a.target == query[1]);
      CHECK(a.contrast == query[2]);
      const size_t n = 1 + size_t(c.n_layer) * (c.n_head + 2) + 1;
      REQUIRE(a.components.size() == n);
      REQUIRE(want.size() == n + 1);
      CHECK(a.components[0].name == "embed");
      CHECK(a.components[1].name == "0.0");
      CHECK(a.components[c.n_head + 1].name == "attn_bias.0");
      CHECK(a.components[c.n_head + 2].name == "mlp.0");
      CHECK(a.components[c.n_head + 3].name == "1.0");
      CHECK(a.components.back().name == "ln_f_bias");
      double sum = 0;
      for (size_t i = 0; i < n; ++i) {
        INFO(a.components[i].name);
        CHECK(a.components[i].value == Approx(want[i]).margin(kF32Tolerance));
        sum += a.components[i].value;
      }
      CHECK(a.logit == Approx(want[n]).margin(kF32Tolerance));
      std::printf("attribution %-8s sum %.7f, logit %.7f, PyTorch's logit %.7f\n", name, sum,
                  a.logit, want[n]);
      CHECK(std::abs(sum - a.logit) <= 1e-4 * std::max(1.0, std::abs(a.logit)));
    }
  }
}

TEST_CASE("attribution refuses what breaks the residual sum, and bad requests",
          "[model][attribution]") {
  const gpt2::Model& model = TinyModel();
  gpt2::Session session(model);
  const std::vector<int> ids = {464, 2068, 7586};
  gpt2::Interventions post;
  post.post_norm = true;
  gpt2::AttributionRequest request;
  request.interventions = &post;
  CHECK_THROWS_AS(gpt2::AttributeLogit(session, ids, request), gpt2::Error);
  gpt2::AttributionRequest bad_position;
  bad_position.position = 3;
  CHECK_THROWS_AS(gpt2::AttributeLogit(session, ids, bad_position), gpt2::Error);
  gpt2::AttributionRequest bad_target;
  bad_target.target = 50257;
  CHECK_THROWS_AS(gpt2::AttributeLogit(session, ids, bad_target), gpt2::Error);
}

}  // namespace
}  // namespace gpt2_test
