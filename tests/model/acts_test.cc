// The record of a run (src/model/acts.h) against PyTorch: a record that keeps every hook holds
// make_golden.py's tensors of the tiny model under TransformerLens's names, a record filled by the
// backward holds PyTorch autograd's gradients, and a record keeps only what it is asked for.
#include "model/acts.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "golden_file.h"
#include "model/backward.h"
#include "model/session.h"
#include "model_test_util.h"

namespace gpt2_test {
namespace {

// As tests/model/golden_test.cc and backward_test.cc bound them.
constexpr double kF32Tolerance = 1e-4;
constexpr double kGradientRelTol = 1e-4;

std::vector<int> Ids(const GoldenFile& golden, const std::string& name) {
  const std::vector<int32_t>& ids = golden.I32(name);
  return std::vector<int>(ids.begin(), ids.end());
}

// The golden's name of hook h at `layer` ("blk1/attn_probs", "embed").
std::string GoldenName(gpt2::Hook h, int layer) {
  const std::string name = gpt2::HookName(h);
  return gpt2::Info(h).per_block ? "blk" + std::to_string(layer) + "/" + name : name;
}

size_t Elements(const GoldenTensor& g) { return size_t(g.NumElements()); }

TEST_CASE("a record of every hook holds PyTorch's tensors by their names",
          "[model][acts][golden]") {
  const GoldenFile& golden = GoldenData("golden_tiny.bin");
  const gpt2::Model& model = TinyModel();
  const gpt2::Config& c = model.config();
  const std::vector<int> ids = Ids(golden, "p3/ids");
  const int T = static_cast<int>(ids.size());
  gpt2::Session session(model);
  gpt2::Acts acts;
  gpt2::RunOptions run;
  gpt2::RecordActs(c, gpt2::Keep{gpt2::HookSet::All(), /*final_stream=*/true}, acts, run);
  session.Prefill(ids.data(), T, run);
  CHECK(acts.T == T);
  CHECK(acts.pos0 == 0);
  int checked = 0;
  for (int hi = 0; hi < gpt2::kNumHooks; ++hi) {
    const gpt2::Hook h = static_cast<gpt2::Hook>(hi);
    const bool per_block = gpt2::Info(h).per_block;
    for (int l = per_block ? 0 : -1; l < (per_block ? c.n_layer : 0); ++l) {
      const std::string name = GoldenName(h, l);
      INFO(name);
      const GoldenTensor& want = golden.Get("p3/" + name);
      const std::vector<float>& got = acts.Of(h, l);
      REQUIRE(got.size() == Elements(want));
      CheckObservedAgainst(want, name, ObservedTensor{want.dims, 0, got}, kF32Tolerance);
      ++checked;
    }
  }
  CHECK(checked == 15 * c.n_layer + 3);
  // The final stream is the last block's resid_post, and what a re-run of the last block reads.
  const GoldenTensor& last = golden.Get("p3/" + GoldenName(gpt2::Hook::kResidPost, c.n_layer - 1));
  REQUIRE(acts.final_stream.size() == Elements(last));
  CHECK(CheckTensor("final_stream", acts.final_stream.data(), last.f32.data(),
                    int64_t(acts.final_stream.size()), kF32Tolerance));
  CHECK(&acts.StreamInto(0) == &acts.embed);
  CHECK(&acts.StreamInto(1) == &acts.blocks[0].resid_post);
}

TEST_CASE("a record keeps only what it is asked for, and the run reports no more",
          "[model][acts]") {
  const gpt2::Model& model = TinyModel();
  const gpt2::Config& c = model.config();
  const std::vector<int> ids = {1, 2, 3, 4, 5};
  gpt2::Session session(model);
  gpt2::Acts acts;
  gpt2::RunOptions run;
  gpt2::RecordActs(c, gpt2::Keep{{gpt2::Hook::kResidMid, gpt2::Hook::kAttnProbs}}, acts, run);
  CHECK_FALSE(run.observe_scores);
  CHECK(run.observe_probs);
  CHECK_FALSE(run.observe_all_logits);
  CHECK(run.observe_whole_prompt);
  session.Prefill(ids.data(), 5, run);
  for (int l = 0; l < c.n_layer; ++l) {
    INFO("block " << l);
    CHECK(acts.blocks[l].resid_mid.size() == size_t(5) * c.n_embd);
    CHECK(acts.blocks[l].pattern.size() == size_t(c.n_head) * 5 * 5);
    for (gpt2::Hook h : {gpt2::Hook::kResidPre, gpt2::Hook::kQ, gpt2::Hook::kAttnScores,
                         gpt2::Hook::kAttnHeads, gpt2::Hook::kMlpOut, gpt2::Hook::kResidPost}) {
      CHECK(acts.Of(h, l).empty());
    }
  }
  CHECK(acts.embed.empty());
  CHECK(acts.final_stream.empty());
  CHECK(acts.logits.empty());
  // Recording again starts from an empty record.
  gpt2::RecordActs(c, gpt2::Keep{{gpt2::Hook::kEmbed}}, acts, run);
  session.Reset();
  session.Prefill(ids.data(), 5, run);
  CHECK(acts.embed.size() == size_t(5) * c.n_embd);
  CHECK(acts.blocks[0].resid_mid.empty());
}

TEST_CASE("PrefillBlocks records Prefill's tensors of the blocks it runs, and no more",
          "[model][acts]") {
  const gpt2::Model& model = TinyModel();
  const gpt2::Config& c = model.config();
  const std::vector<int> ids = {1, 7, 3, 11, 5, 9};
  const int T = static_cast<int>(ids.size());
  gpt2::Session session(model);
  gpt2::Acts whole, part;
  const gpt2::Keep keep{gpt2::HookSet::All(), /*final_stream=*/true};
  gpt2::RunOptions run;
  gpt2::RecordActs(c, keep, whole, run);
  session.Prefill(ids.data(), T, run);
  for (int end = 1; end <= c.n_layer; ++end) {
    INFO("blocks 0.." << end - 1);
    gpt2::RecordActs(c, keep, part, run);
    session.Reset();
    session.PrefillBlocks(ids.data(), T, end, run);
    CHECK(session.position() == T);
    CHECK(part.embed == whole.embed);
    for (int l = 0; l < c.n_layer; ++l) {
      for (int hi = 0; hi < gpt2::kNumHooks; ++hi) {
        const gpt2::Hook h = static_cast<gpt2::Hook>(hi);
        if (!gpt2::Info(h).per_block) continue;
        INFO(gpt2::HookName(h) << " of block " << l);
        if (l < end) {
          CHECK(part.Of(h, l) == whole.Of(h, l));  // the same bits
        } else {
          CHECK(part.Of(h, l).empty());
        }
      }
    }
    CHECK(part.final_stream.empty() == (end < c.n_layer));
    CHECK(part.logits.empty() == (end < c.n_layer));
  }
  CHECK_THROWS_WITH(session.PrefillBlocks(ids.data(), T, 0, run),
                    Catch::Contains("the model has 0.." + std::to_string(c.n_layer - 1)));
}

TEST_CASE("the backward fills a record of the same type with PyTorch's gradients",
          "[model][acts][gradients][golden]") {
  const GoldenFile& golden = GoldenData("golden_gradients.bin");
  const gpt2::Model& model = TinyModel();
  const gpt2::Config& c = model.config();
  const std::vector<int> ids = Ids(golden, "ids");
  const std::vector<int32_t>& q = golden.I32("grad/plain/query");
  const gpt2::MetricSpec spec{q[0], q[1], q[2]};
  gpt2::Session session(model);
  gpt2::Backward backward(model);
  backward.Forward(session, ids, nullptr);
  gpt2::Acts grads;
  backward.Run(spec, gpt2::ActsObserver(c, gpt2::Keep{gpt2::HookSet::All()}, grads));
  int checked = 0;
  const std::string prefix = "grad/plain/";
  for (const auto& g : golden.tensors()) {
    if (g.first.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string name = g.first.substr(prefix.size());
    if (name == "query" || name == "metric") continue;
    INFO(name);
    const size_t slash = name.find('/');
    const int layer = slash == std::string::npos ? -1 : std::stoi(name.substr(3, slash - 3));
    gpt2::Hook hook;
    REQUIRE(gpt2::FindHook(slash == std::string::npos ? name : name.substr(slash + 1), &hook));
    const std::vector<float>& got = grads.Of(hook, layer);
    REQUIRE(got.size() == Elements(g.second));
    double scale = 0.0;
    for (float v : g.second.f32) scale = std::max(scale, double(std::fabs(v)));
    CHECK(CheckTensor(g.first, got.data(), g.second.f32.data(), int64_t(got.size()),
                      kGradientRelTol * std::max(scale, 1e-6)));
    ++checked;
  }
  CHECK(checked == 2 + 14 * c.n_layer);
  // The forward's own record: what the backward read.
  CHECK(backward.acts().blocks[0].q.size() == size_t(ids.size()) * c.n_embd);
  CHECK(backward.acts().blocks[0].scores.empty());
}

}  // namespace
}  // namespace gpt2_test
