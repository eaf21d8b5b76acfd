// The quantization lens (src/lab/compare.h) against figures computed here from what the forward
// pass reports to a Recorder (the activation observer, as `gpt2 inspect --json` writes it) in
// fresh sessions: each block's blocks.L.hook_resid_post, and each block's logit lens as the final
// "logits" of a run whose later blocks are skipped (attention and MLP add nothing, so ln_f and
// the unembedding see that block's stream: the forward pass's own Unembed, not CompareModels's
// lens windows).
#include "lab/compare.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../model/model_test_util.h"
#include "base/error.h"
#include "lab/lab.h"
#include "model/attribution.h"
#include "model/capture.h"
#include "tools/common/synthetic_model.h"

namespace gpt2_test {
namespace {

const std::vector<int> kIds = {464, 2068,  7586, 21831, 50256, 18045, 625, 262,  16931, 3290,
                               0,   31373, 11,   995,   1212,  318,   257, 1332, 49999, 25};

std::unique_ptr<LoadedModel> Synthetic(gpt2::TensorType type,
                                       gpt2::Config config = gpt2::TinyTestConfig()) {
  return LoadModelBytes(gpt2::SyntheticModelBytes(config, type, nullptr));
}

struct Reference {
  std::vector<std::vector<float>> resid;  // [L][T, C]
  std::vector<std::vector<float>> lens;   // [L][T, V]
  std::vector<std::vector<float>> probs;  // [L][H, T, T]
};

Reference Observe(const gpt2::Model& model, const std::vector<int>& ids) {
  const gpt2::Config& c = model.config();
  const int T = int(ids.size());
  Reference r;
  {
    gpt2::Recorder recorder;
    gpt2::RunOptions run;
    run.observer = recorder.Observer();
    gpt2::Session session(model);
    session.Prefill(ids.data(), T, run);
    for (int l = 0; l < c.n_layer; ++l) {
      r.resid.push_back(recorder.Find("resid_out", l)->data);
      r.probs.push_back(recorder.Find("attn_probs", l)->data);
    }
  }
  for (int l = 0; l < c.n_layer; ++l) {
    gpt2::Interventions iv;
    for (int k = l + 1; k < c.n_layer; ++k) {
      iv.skip_attn.push_back(k);
      iv.skip_mlp.push_back(k);
    }
    gpt2::Recorder recorder;
    gpt2::RunOptions run;
    run.observer = recorder.Observer();
    run.interventions = &iv;
    gpt2::Session session(model);
    session.Prefill(ids.data(), T, run);
    r.lens.push_back(recorder.Find("logits", -1)->data);
  }
  return r;
}

struct Figures {
  std::vector<double> cos, rel, kl, head_drift;
  int agree = 0;
};

// The definitions of compare.h, written out once more in double.
Figures FromReferences(const Reference& a, const Reference& b, const gpt2::Config& c, int T) {
  const int L = c.n_layer, H = c.n_head;
  const int64_t C = c.n_embd, V = c.n_vocab;
  Figures f;
  for (int l = 0; l < L; ++l) {
    double cos = 0, rel = 0, kl = 0;
    for (int p = 0; p < T; ++p) {
      const float* xa = a.resid[l].data() + p * C;
      const float* xb = b.resid[l].data() + p * C;
      double dot = 0, na = 0, nb = 0, d = 0;
      for (int64_t i = 0; i < C; ++i) {
        dot += double(xa[i]) * xb[i];
        na += double(xa[i]) * xa[i];
        nb += double(xb[i]) * xb[i];
        d += (double(xa[i]) - xb[i]) * (double(xa[i]) - xb[i]);
      }
      cos += dot / std::sqrt(na) / std::sqrt(nb) / T;
      rel += std::sqrt(d) / std::sqrt(na) / T;
      const float* la = a.lens[l].data() + p * V;
      const float* lb = b.lens[l].data() + p * V;
      double sa = 0, sb = 0;
      const double ma = *std::max_element(la, la + V), mb = *std::max_element(lb, lb + V);
      for (int64_t v = 0; v < V; ++v) {
        sa += std::exp(la[v] - ma);
        sb += std::exp(lb[v] - mb);
      }
      double k = 0;
      for (int64_t v = 0; v < V; ++v) {
        const double pa = std::exp(la[v] - ma) / sa, pb = std::exp(lb[v] - mb) / sb;
        k += pa * std::log(pa / pb);
      }
      kl += k / T;
      if (l == L - 1)
        f.agree += std::max_element(la, la + V) - la == std::max_element(lb, lb + V) - lb;
    }
    f.cos.push_back(cos);
    f.rel.push_back(rel);
    f.kl.push_back(kl);
    for (int h = 0; h < H; ++h) {
      double drift = 0;
      for (int q = 0; q < T; ++q) {
        for (int k = 0; k <= q; ++k) {
          const size_t i = (size_t(h) * T + q) * T + k;
          drift += 0.5 * std::fabs(double(a.probs[l][i]) - b.probs[l][i]) / T;
        }
      }
      f.head_drift.push_back(drift);
    }
  }
  return f;
}

TEST_CASE("A model compared with itself: cos 1, rel 0, kl 0, every top-1 agrees",
          "[circuits][compare]") {
  auto m = Synthetic(gpt2::TensorType::kQ8_0);
  gpt2::Session a(*m->model), b(*m->model);
  gpt2::CompareOptions options;
  options.head_drift = true;
  const gpt2::Comparison r = gpt2::CompareModels(a, b, kIds, options);
  REQUIRE(r.blocks.size() == 2);
  for (const gpt2::BlockDrift& d : r.blocks) {
    CHECK(d.cos == Approx(1.0).margin(1e-12));
    CHECK(d.rel == 0.0);
    CHECK(std::fabs(d.kl) < 1e-12);
  }
  CHECK(r.agree == int(kIds.size()));
  CHECK(r.positions == int(kIds.size()));
  for (double d : r.head_drift) CHECK(d == 0.0);
  CHECK(a.position() == int(kIds.size()));
}

TEST_CASE("F32 against Q8_0 and Q4_0 of the same weights equals the figures from the observer",
          "[circuits][compare]") {
  auto f32 = Synthetic(gpt2::TensorType::kF32);
  const gpt2::Config& c = f32->model->config();
  const int T = int(kIds.size());
  const Reference ref_a = Observe(*f32->model, kIds);
  for (gpt2::TensorType type : {gpt2::TensorType::kQ8_0, gpt2::TensorType::kQ4_0}) {
    auto quant = Synthetic(type);
    const Reference ref_b = Observe(*quant->model, kIds);
    const Figures want = FromReferences(ref_a, ref_b, c, T);
    gpt2::Session a(*f32->model), b(*quant->model);
    gpt2::CompareOptions options;
    options.head_drift = true;
    options.attribution = true;
    const gpt2::Comparison r = gpt2::CompareModels(a, b, kIds, options);
    for (int l = 0; l < c.n_layer; ++l) {
      INFO("type " << int(type) << " block " << l << ": cos " << r.blocks[l].cos << " rel "
                   << r.blocks[l].rel << " kl " << r.blocks[l].kl);
      CHECK(r.blocks[l].cos == Approx(want.cos[l]).margin(1e-9));
      CHECK(r.blocks[l].rel == Approx(want.rel[l]).epsilon(1e-6));
      CHECK(r.blocks[l].kl == Approx(want.kl[l]).epsilon(1e-3).margin(1e-7));
      // Quantized weights move the stream, and measurably: not a comparison of a model with itself.
      CHECK(r.blocks[l].rel > 1e-3);
      CHECK(r.blocks[l].kl > 1e-5);
    }
    CHECK(r.agree == want.agree);
    for (size_t i = 0; i < want.head_drift.size(); ++i) {
      CHECK(r.head_drift[i] == Approx(want.head_drift[i]).epsilon(1e-5).margin(1e-9));
    }
    // Attribution of both for A's top token, as AttributeLogit gives it alone.
    gpt2::Session fresh(*quant->model);
    gpt2::AttributionRequest request;
    request.target = r.attribution_a.target;
    const gpt2::Attribution alone = gpt2::AttributeLogit(fresh, kIds, request);
    CHECK(r.attribution_b.target == r.attribution_a.target);
    REQUIRE(r.attribution_b.components.size() == alone.components.size());
    for (size_t i = 0; i < alone.components.size(); ++i) {
      CHECK(r.attribution_b.components[i].value == Approx(alone.components[i].value).margin(1e-6));
    }
  }
}

TEST_CASE("Models of different shapes or vocabularies are not compared", "[circuits][compare]") {
  auto a = Synthetic(gpt2::TensorType::kF32);
  gpt2::Config deeper = gpt2::TinyTestConfig();
  deeper.n_layer = 3;
  auto b = Synthetic(gpt2::TensorType::kF32, deeper);
  gpt2::Session sa(*a->model), sb(*b->model);
  CHECK_THROWS_WITH(gpt2::CompareModels(sa, sb, kIds),
                    Catch::Contains("n_layer is 2 in the first and 3"));
  gpt2::Session sa2(*a->model);
  CHECK_THROWS_WITH(gpt2::CompareModels(sa, sa2, {}), Catch::Contains("empty"));
  CHECK_THROWS_WITH(gpt2::CompareModels(sa, sa2, std::vector<int>(65, 1)),
                    Catch::Contains("context of 64"));
}

TEST_CASE("The page's lens: the lab's model against its re-encoded twin, then the prompt captured",
          "[circuits][compare]") {
  std::vector<uint8_t> bytes =
      gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), gpt2::TensorType::kF32, nullptr);
  gpt2::LoadedGguf loaded;
  loaded.file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
  loaded.model = gpt2::Model::FromGguf(loaded.file);
  gpt2::Lab lab(std::move(loaded), 1);
  std::unique_ptr<gpt2::SecondModel> twin =
      gpt2::SecondModel::Requantized(lab.file(), gpt2::TensorType::kQ4_0);
  CHECK(std::string(twin->matrix_type()) == "q4_0");
  // The same file the synthetic maker writes in Q4_0 (tests/convert/requantize_test.cc).
  auto q4 = Synthetic(gpt2::TensorType::kQ4_0);
  CHECK(twin->file_bytes() == q4->bytes.size());

  lab.SetCapture(false);
  lab.Run({1, 2, 3});
  const gpt2::Comparison r = gpt2::CompareOnConversation(lab.conv(), *twin, kIds);
  // As two fresh sessions give it.
  gpt2::Session a(lab.model()), b(*q4->model);
  gpt2::CompareOptions options;
  options.head_drift = true;
  options.attribution = true;
  const gpt2::Comparison want = gpt2::CompareModels(a, b, kIds, options);
  REQUIRE(r.blocks.size() == want.blocks.size());
  for (size_t l = 0; l < r.blocks.size(); ++l) {
    CHECK(r.blocks[l].cos == want.blocks[l].cos);
    CHECK(r.blocks[l].rel == want.blocks[l].rel);
    CHECK(r.blocks[l].kl == want.blocks[l].kl);
  }
  CHECK(r.agree == want.agree);
  CHECK(r.head_drift == want.head_drift);
  REQUIRE(r.attribution_b.components.size() == want.attribution_b.components.size());
  for (size_t i = 0; i < r.attribution_b.components.size(); ++i) {
    CHECK(r.attribution_b.components[i].value == want.attribution_b.components[i].value);
  }
  // The conversation is the prompt, captured, the capture setting as it was.
  CHECK(lab.tokens() == kIds);
  CHECK(lab.capture().n_positions() == int(kIds.size()));
  CHECK_FALSE(lab.capture_on());

  // A twin of another shape is refused before anything runs.
  gpt2::Config deeper = gpt2::TinyTestConfig();
  deeper.n_layer = 3;
  gpt2::SecondModel other(gpt2::SyntheticModelBytes(deeper, gpt2::TensorType::kF32, nullptr));
  CHECK_THROWS_WITH(gpt2::CompareOnConversation(lab.conv(), other, kIds),
                    Catch::Contains("n_layer"));
  CHECK(lab.tokens() == kIds);
  CHECK_THROWS_WITH(gpt2::CompareOnConversation(lab.conv(), *twin, {}), Catch::Contains("empty"));
}

}  // namespace
}  // namespace gpt2_test
