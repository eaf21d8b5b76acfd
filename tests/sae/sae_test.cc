// Sparse autoencoders (src/sae/, lab/features.h) against PyTorch: SAELens's math written out in
// scripts/make_golden.py (write_saes) with small random SAEs in SAELens's layout on the tiny
// synthetic model (tests/data/sae/<name>/, tests/data/golden_sae.bin): activations, explained
// share, logit weights, steered and clamped logits; the converter's f32 round trip; every cfg
// layout the public files use and every unsupported cfg as a clear error.
#include "sae/sae.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../convert/convert_test_util.h"
#include "../model/golden_file.h"
#include "../test_paths.h"
#include "base/error.h"
#include "base/text.h"
#include "convert/sae_convert.h"
#include "format/safetensors.h"
#include "lab/lab.h"
#include "model/attribution.h"
#include "sae/sae_config.h"
#include "sae_test_util.h"
#include "tools/common/synthetic_model.h"

namespace gpt2_test {
namespace {

constexpr double kF32Tolerance = 1e-4;
const char* const kSaes[] = {"standard", "jumprelu", "topk", "layer_norm", "mlp_out"};

const GoldenFile& Golden() { return GoldenData("golden_sae.bin"); }

std::string Cfg(const std::string& name) { return SaeCfg(name); }

struct TinySaeLab {
  std::vector<uint8_t> bytes =
      gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), gpt2::TensorType::kF32, nullptr);
  std::unique_ptr<gpt2::Lab> lab;
  TinySaeLab() {
    gpt2::LoadedGguf loaded;
    loaded.file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
    loaded.model = gpt2::Model::FromGguf(loaded.file);
    lab = std::make_unique<gpt2::Lab>(std::move(loaded), 1);
  }
  void Run(const std::vector<int>& ids) {
    lab->Reset();
    lab->SetCapture(true);
    lab->Run(ids);
  }
};

std::vector<int> Ids(const std::string& name) {
  const std::vector<int32_t>& ids = Golden().I32("sae/" + name + "/ids");
  return std::vector<int>(ids.begin(), ids.end());
}

std::vector<std::pair<int, float>> Pairs(const std::vector<float>& flat) {
  std::vector<std::pair<int, float>> out;
  for (size_t i = 0; i + 1 < flat.size(); i += 2)
    out.push_back({static_cast<int>(flat[i]), flat[i + 1]});
  return out;
}

void ExpectError(const std::string& json, const std::string& fragment) {
  INFO(json);
  try {
    gpt2::SaeConfigFromJson(json);
    FAIL("no error for a cfg that should fail: " << fragment);
  } catch (const gpt2::Error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(fragment) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("SAE cfg.json: every layout of the public files", "[sae]") {
  // The golden SAEs' four layouts (make_golden.py SAES).
  const gpt2::SaeConfig jb = gpt2::SaeConfigFromJson(Cfg("standard"));  // hook_point + hook_name
  CHECK(jb.layer == 1);
  CHECK(jb.point == gpt2::StreamPoint::kResidPre);
  CHECK(jb.architecture == gpt2::SaeArchitecture::kStandard);
  CHECK(jb.apply_b_dec_to_input);
  CHECK(jb.d_in == 64);
  CHECK(jb.d_sae == 96);
  const gpt2::SaeConfig v6 = gpt2::SaeConfigFromJson(Cfg("jumprelu"));  // metadata.hook_name
  CHECK(v6.point == gpt2::StreamPoint::kResidPost);
  CHECK(v6.architecture == gpt2::SaeArchitecture::kJumpRelu);
  CHECK_FALSE(v6.apply_b_dec_to_input);
  const gpt2::SaeConfig legacy = gpt2::SaeConfigFromJson(Cfg("topk"));  // activation_fn_kwargs.k
  CHECK(legacy.architecture == gpt2::SaeArchitecture::kTopK);
  CHECK(legacy.k == 8);
  CHECK(legacy.point == gpt2::StreamPoint::kAttnOut);
  const gpt2::SaeConfig point = gpt2::SaeConfigFromJson(Cfg("layer_norm"));  // hook_point only
  CHECK(point.normalize == gpt2::SaeNormalize::kLayerNorm);
  CHECK(point.point == gpt2::StreamPoint::kResidMid);
  const gpt2::SaeConfig top6 = gpt2::SaeConfigFromJson(Cfg("mlp_out"));  // SAELens 6 top-level k
  CHECK(top6.k == 6);
  CHECK(top6.point == gpt2::StreamPoint::kMlpOut);

  // Defaults of older files: no architecture is standard, normalize false is none.
  const gpt2::SaeConfig old = gpt2::SaeConfigFromJson(
      R"({"hook_point": "blocks.8.hook_resid_pre", "d_in": 768, "d_sae": 24576, "normalize_activations": false})");
  CHECK(old.layer == 8);
  CHECK(old.architecture == gpt2::SaeArchitecture::kStandard);
  CHECK(old.normalize == gpt2::SaeNormalize::kNone);
  CHECK(old.apply_b_dec_to_input);
}

TEST_CASE("SAE cfg.json: anything unsupported is an error naming it", "[sae]") {
  const std::string base = R"("d_in": 64, "d_sae": 96, )";
  ExpectError("[1]", "not a JSON object");
  ExpectError("{" + base + R"("architecture": "gated", "hook_name": "blocks.0.hook_resid_pre"})",
              "gated");
  ExpectError(
      "{" + base +
          R"("normalize_activations": "expected_average_only_in", "hook_name": "blocks.0.hook_resid_pre"})",
      "expected_average_only_in");
  ExpectError("{" + base + R"("hook_name": "blocks.0.attn.hook_z"})", "blocks.0.attn.hook_z");
  ExpectError("{" + base + R"("hook_name": "blocks.x.hook_resid_pre"})", "blocks.x.hook_resid_pre");
  ExpectError("{" + base + R"("hook_name": "blocks.0.hook_resid_pre", "hook_head_index": 3})",
              "hook_head_index");
  ExpectError("{" + base + R"("architecture": "topk", "hook_name": "blocks.0.hook_resid_pre"})",
              "without k");
  ExpectError(
      "{" + base + R"("architecture": "topk", "k": 97, "hook_name": "blocks.0.hook_resid_pre"})",
      "1..96");
  ExpectError(
      "{" + base +
          R"("hook_name": "blocks.0.hook_resid_pre", "hook_point": "blocks.1.hook_resid_pre"})",
      "two hooks");
  ExpectError(R"({"d_sae": 96, "hook_name": "blocks.0.hook_resid_pre"})", "d_in");
  ExpectError(
      "{" + base + R"("hook_name": "blocks.0.hook_resid_pre", "activation_fn_str": "tanh-relu"})",
      "tanh-relu");
  ExpectError("{" + base + R"("d_in": 64})", "");  // a duplicate key: the JSON reader's error
  ExpectError(R"({"d_in": 64, "d_sae": 96})", "hook_name");
}

TEST_CASE("SAE converter: f32 round trip is exact; quantized encoder, f32 decoder", "[sae]") {
  for (const char* name : kSaes) {
    INFO(name);
    const std::vector<uint8_t> gguf = ConvertSae(name, gpt2::TensorType::kF32);
    std::unique_ptr<gpt2::GgufFile> file = gpt2::GgufFile::Parse(gguf.data(), gguf.size());
    const gpt2::SaeConfig c = gpt2::SaeConfigFromGguf(*file);
    CHECK(c.hook_name == gpt2::SaeConfigFromJson(Cfg(name)).hook_name);
    CHECK(file->GetString("sae.cfg_json") == Cfg(name));
    const std::string weights =
        gpt2::ReadWholeFile(DataPath(std::string("sae/") + name + "/sae_weights.safetensors"), "w");
    std::unique_ptr<gpt2::SafetensorsFile> st = gpt2::SafetensorsFile::Parse(
        reinterpret_cast<const uint8_t*>(weights.data()), weights.size());
    for (const gpt2::SafetensorsTensor& t : st->tensors()) {
      const gpt2::GgufTensor* g = file->FindTensor("sae." + t.name);
      REQUIRE(g != nullptr);
      REQUIRE(g->type == gpt2::TensorType::kF32);
      const std::vector<float> want = gpt2::ReadAsF32(t);
      const float* got = reinterpret_cast<const float*>(g->data);
      if (t.name == "W_enc") {  // [d_in, d_sae] stored a feature per row
        const int64_t d_in = t.shape[0], d_sae = t.shape[1];
        for (int64_t i = 0; i < d_in; ++i) {
          for (int64_t f = 0; f < d_sae; ++f) REQUIRE(got[f * d_in + i] == want[i * d_sae + f]);
        }
      } else {
        REQUIRE(std::memcmp(got, want.data(), want.size() * sizeof(float)) == 0);
      }
    }
  }
  const std::vector<uint8_t> q = ConvertSae("jumprelu", gpt2::TensorType::kQ4_0);
  std::unique_ptr<gpt2::GgufFile> file = gpt2::GgufFile::Parse(q.data(), q.size());
  CHECK(file->FindTensor("sae.W_enc")->type == gpt2::TensorType::kQ4_0);
  for (const char* t : {"sae.b_enc", "sae.W_dec", "sae.b_dec", "sae.threshold"}) {
    CHECK(file->FindTensor(t)->type == gpt2::TensorType::kF32);
  }
}

TEST_CASE("SAE converter: wrong or missing tensors are errors naming them", "[sae]") {
  const std::string json = Cfg("standard");
  const std::string weights =
      gpt2::ReadWholeFile(DataPath("sae/standard/sae_weights.safetensors"), "w");
  std::unique_ptr<gpt2::SafetensorsFile> st = gpt2::SafetensorsFile::Parse(
      reinterpret_cast<const uint8_t*>(weights.data()), weights.size());
  gpt2::SaeConfig c = gpt2::SaeConfigFromJson(json);
  c.d_sae = 128;  // the shapes no longer match
  CHECK_THROWS_WITH(gpt2::SaeGgufConversion(*st, c, json, gpt2::TensorType::kF32),
                    Catch::Contains("W_enc"));
  c = gpt2::SaeConfigFromJson(json);
  c.architecture = gpt2::SaeArchitecture::kJumpRelu;  // needs a threshold the file lacks
  CHECK_THROWS_WITH(gpt2::SaeGgufConversion(*st, c, json, gpt2::TensorType::kF32),
                    Catch::Contains("threshold"));
  const std::string jump =
      gpt2::ReadWholeFile(DataPath("sae/jumprelu/sae_weights.safetensors"), "w");
  std::unique_ptr<gpt2::SafetensorsFile> jst =
      gpt2::SafetensorsFile::Parse(reinterpret_cast<const uint8_t*>(jump.data()), jump.size());
  CHECK_THROWS_WITH(
      gpt2::SaeGgufConversion(*jst, gpt2::SaeConfigFromJson(json), json, gpt2::TensorType::kF32),
      Catch::Contains("threshold"));
}

TEST_CASE("SAE activations, explained share and logit weights equal PyTorch's", "[sae]") {
  TinySaeLab t;
  for (const char* name : kSaes) {
    INFO(name);
    const int id = t.lab->LoadSae(ConvertSae(name, gpt2::TensorType::kF32));
    const std::vector<int> ids = Ids(name);
    t.Run(ids);
    const int T = static_cast<int>(ids.size()), S = t.lab->sae(id).d_sae();
    const std::vector<float>& want = Golden().F32(std::string("sae/") + name + "/features");
    std::vector<float> got(size_t(T) * S);
    for (int f = 0; f < S; ++f) {
      const std::vector<float> strip = t.lab->SaeStrip(id, f);
      REQUIRE(strip.size() == size_t(T));
      for (int p = 0; p < T; ++p) got[size_t(p) * S + f] = strip[p];
    }
    CHECK(CheckTensor(std::string(name) + " features", got.data(), want.data(), T * S,
                      kF32Tolerance));
    const std::vector<float>& explained = Golden().F32(std::string("sae/") + name + "/explained");
    int fired = 0;
    for (int p = 0; p < T; ++p) {
      const gpt2::SaeFeatureList list = t.lab->SaeFeatures(id, p, S);
      CHECK(std::fabs(list.explained - explained[p]) < kF32Tolerance);
      // Every nonzero feature, descending, as the strip says.
      for (size_t i = 0; i < list.features.size(); ++i) {
        CHECK(list.activations[i] == got[size_t(p) * S + list.features[i]]);
        if (i > 0) CHECK(list.activations[i] <= list.activations[i - 1]);
      }
      int nonzero = 0;
      for (int f = 0; f < S; ++f) nonzero += got[size_t(p) * S + f] != 0;
      CHECK(static_cast<int>(list.features.size()) == nonzero);
      fired += nonzero;
    }
    CHECK(fired > 0);
    CHECK(fired < T * S / 2);
    const std::vector<float>& logit_want =
        Golden().F32(std::string("sae/") + name + "/logit_weights");
    const int64_t V = static_cast<int64_t>(logit_want.size());
    const std::vector<float> logit_got = t.lab->sae(id).LogitWeights(t.lab->model(), {7});
    CHECK(CheckTensor(std::string(name) + " logit weights", logit_got.data(), logit_want.data(), V,
                      kF32Tolerance));
    // Several features in one product: feature 7's row is PyTorch's wherever it stands, and each
    // row is that feature's own product.
    const std::vector<int> several = {3, 7, 0, 95};
    const std::vector<float> rows = t.lab->sae(id).LogitWeights(t.lab->model(), several);
    REQUIRE(rows.size() == several.size() * V);
    CHECK(CheckTensor(std::string(name) + " logit weights, batched", rows.data() + V,
                      logit_want.data(), V, kF32Tolerance));
    for (size_t i = 0; i < several.size(); ++i) {
      const std::vector<float> one = t.lab->sae(id).LogitWeights(t.lab->model(), {several[i]});
      CHECK(CheckTensor(std::string(name) + " logit weights row " + std::to_string(i),
                        rows.data() + i * V, one.data(), V, kF32Tolerance));
    }
    const std::vector<gpt2::SaeLogitWeights> lw = t.lab->SaeLogitWeightsOf(id, {0, 7}, 5);
    REQUIRE(lw.size() == 2);
    CHECK(lw[1].promoted[0] ==
          std::max_element(logit_want.begin(), logit_want.end()) - logit_want.begin());
    CHECK(lw[1].suppressed[0] ==
          std::min_element(logit_want.begin(), logit_want.end()) - logit_want.begin());
    CHECK(t.lab->SaeLogitWeightsOf(id, {}, 5).empty());
    CHECK_THROWS_WITH(t.lab->SaeLogitWeightsOf(id, {7, S}, 5), Catch::Contains("0..95"));
    CHECK_THROWS_WITH(t.lab->SaeStrip(id, S), Catch::Contains("0..95"));
    t.lab->DropSae(id);
  }
}

TEST_CASE("a Q8_0 SAE keeps each position's top features", "[sae]") {
  TinySaeLab t;
  for (const char* name : kSaes) {
    INFO(name);
    const int f32 = t.lab->LoadSae(ConvertSae(name, gpt2::TensorType::kF32));
    const int q8 = t.lab->LoadSae(ConvertSae(name, gpt2::TensorType::kQ8_0));
    const std::vector<int> ids = Ids(name);
    t.Run(ids);
    for (int p = 0; p < static_cast<int>(ids.size()); ++p) {
      const gpt2::SaeFeatureList a = t.lab->SaeFeatures(f32, p, 3),
                                 b = t.lab->SaeFeatures(q8, p, 3);
      INFO("position " << p);
      REQUIRE(!a.features.empty());
      CHECK(a.features[0] == b.features[0]);
      CHECK(std::fabs(a.activations[0] - b.activations[0]) < 0.05 * a.activations[0] + 0.01);
    }
  }
}

TEST_CASE("SAE steering and clamping equal PyTorch's logits", "[sae]") {
  TinySaeLab t;
  for (const char* name : kSaes) {
    INFO(name);
    const int id = t.lab->LoadSae(ConvertSae(name, gpt2::TensorType::kF32));
    const std::vector<int> ids = Ids(name);
    const std::string key = std::string("sae/") + name;
    const auto steer = Pairs(Golden().F32(key + "/steer")),
               clamp = Pairs(Golden().F32(key + "/clamp"));
    const struct {
      const char* name;
      gpt2::SaeIntervention si;
    } cases[] = {
        {"steer", {id, steer, {}}}, {"clamp", {id, {}, clamp}}, {"both", {id, steer, clamp}}};
    for (const auto& c : cases) {
      INFO(c.name);
      const std::vector<float>& want = Golden().F32(key + "/" + c.name + "/logits");
      // A fresh session's prefill under the edit.
      gpt2::Interventions iv;
      iv.stream_edits.push_back(t.lab->SaeEdit(c.si));
      gpt2::Session fresh(t.lab->model());
      gpt2::RunOptions run;
      run.interventions = &iv;
      const float* logits = fresh.Prefill(ids.data(), static_cast<int>(ids.size()), run);
      CHECK(CheckTensor(key + " " + c.name + " prefill", logits, want.data(),
                        static_cast<int64_t>(want.size()), kF32Tolerance));
      // The lab: the plain run captured, then the interventions set and re-run from the SAE's
      // block.
      t.Run(ids);
      gpt2::LabInterventions li;
      li.sae.push_back(c.si);
      t.lab->SetInterventions(li, gpt2::MeansOf::kCapture);
      CHECK(t.lab->FirstChangedBlock() == t.lab->sae(id).config().layer);
      CHECK(t.lab->Rerun() == t.lab->sae(id).config().layer);
      const std::vector<float> probs = t.lab->FinalProbs(static_cast<int>(ids.size()) - 1);
      // Softmax of the golden logits against the lab's distribution.
      const float top = *std::max_element(want.begin(), want.end());
      double sum = 0;
      for (float v : want) sum += std::exp(double(v) - top);
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::fabs(probs[i] - std::exp(double(want[i]) - top) / sum));
      }
      CHECK(worst < 1e-5);
      t.lab->SetInterventions({}, gpt2::MeansOf::kCapture);
    }
    gpt2::SaeIntervention bad{id, {{96, 1.0f}}, {}};
    CHECK_THROWS_WITH(t.lab->SaeEdit(bad), Catch::Contains("0..95"));
    t.lab->DropSae(id);
  }
}

TEST_CASE("an SAE loaded after the run reads its hook; a wrong width is refused", "[sae]") {
  TinySaeLab t;
  const std::vector<int> ids = Ids("topk");
  t.Run(ids);
  // attn_out is not kept by the capture: the lab re-runs from its block to read it.
  const int id = t.lab->LoadSae(ConvertSae("topk", gpt2::TensorType::kF32));
  const std::vector<float>& want = Golden().F32("sae/topk/features");
  const int S = t.lab->sae(id).d_sae();
  const gpt2::SaeFeatureList list = t.lab->SaeFeatures(id, 2, 1);
  REQUIRE(list.features.size() == 1);
  CHECK(std::fabs(list.activations[0] -
                  *std::max_element(want.begin() + 2 * S, want.begin() + 3 * S)) < kF32Tolerance);

  gpt2::Config wide = gpt2::TinyTestConfig();
  wide.n_embd = 128;
  wide.n_ff = 512;
  std::vector<uint8_t> bytes = gpt2::SyntheticModelBytes(wide, gpt2::TensorType::kF32, nullptr);
  gpt2::LoadedGguf loaded;
  loaded.file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
  loaded.model = gpt2::Model::FromGguf(loaded.file);
  gpt2::Lab other(std::move(loaded), 1);
  CHECK_THROWS_WITH(other.LoadSae(ConvertSae("standard", gpt2::TensorType::kF32)),
                    Catch::Contains("64"));
  CHECK_THROWS_WITH(other.DropSae(7), Catch::Contains("no SAE"));
}

}  // namespace gpt2_test

namespace gpt2_test {

TEST_CASE("direct logit attribution under SAE steering: the edit is one more term of the sum",
          "[sae]") {
  TinySaeLab t;
  const int id = t.lab->LoadSae(ConvertSae("standard", gpt2::TensorType::kF32));
  gpt2::Interventions iv;
  iv.stream_edits.push_back(t.lab->SaeEdit({id, {{3, 4.0f}}, {{5, 0.0f}}}));
  gpt2::Session session(t.lab->model());
  gpt2::AttributionRequest request;
  request.interventions = &iv;
  const gpt2::Attribution a = gpt2::AttributeLogit(session, Ids("standard"), request);
  double sum = 0;
  bool edit = false;
  for (const gpt2::AttributionComponent& c : a.components) {
    sum += c.value;
    edit = edit || c.name == "stream_edits";
  }
  CHECK(edit);
  CHECK(std::fabs(sum - a.logit) < 1e-3 * std::max(1.0, std::fabs(a.logit)));
}

}  // namespace gpt2_test

namespace gpt2_test {

TEST_CASE("SAE: the clamped features' rows alone equal the full encode, bit for bit", "[sae]") {
  // The full encode is the reference: EncodeFeatures computes only the encoder rows of the
  // clamped features (standard, JumpReLU) and must give the same bits, in any order, with
  // repeats and features from several row groups; TopK encodes everything.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const char* name : kSaes) {
    for (const gpt2::TensorType type : {gpt2::TensorType::kF32, gpt2::TensorType::kQ8_0}) {
      INFO(name << " " << gpt2::GgmlTypeName(static_cast<uint32_t>(type)));
      const std::vector<uint8_t> bytes = ConvertSae(name, type);
      auto sae = std::make_shared<const gpt2::Sae>(
          std::shared_ptr<const gpt2::GgufFile>(gpt2::GgufFile::Parse(bytes.data(), bytes.size())),
          64);
      const int n = 9, C = sae->config().d_in, S = sae->d_sae();
      std::vector<float> x(size_t(n) * C);
      for (float& v : x) v = 3.0f * normal(rng) + 0.5f;
      std::vector<float> all(size_t(n) * S), scale(n);
      gpt2::SaeScratch scratch;
      sae->Encode(x.data(), n, all.data(), scale.data(), scratch);
      std::vector<int> features = {S - 1, 0, 1, S / 2, S - 1, 47, 48};
      for (int f = S - 1; f >= 0; --f) features.push_back(f);  // every feature, from the back
      const int K = static_cast<int>(features.size());
      std::vector<float> acts(size_t(n) * K), scale_rows(n);
      sae->EncodeFeatures(x.data(), n, features.data(), K, acts.data(), scale_rows.data(), scratch);
      int nonzero = 0;
      for (int t = 0; t < n; ++t) {
        REQUIRE(scale_rows[t] == scale[t]);
        for (int j = 0; j < K; ++j) {
          const float want = all[size_t(t) * S + features[j]], got = acts[size_t(t) * K + j];
          INFO("row " << t << " feature " << features[j]);
          REQUIRE(std::memcmp(&want, &got, sizeof(float)) == 0);
          nonzero += got != 0;
        }
      }
      CHECK(nonzero > 0);
      CHECK(nonzero < n * K);

      // The clamping edit against the same formula over the full encode.
      const std::vector<std::pair<int, float>> clamp = {{3, 2.5f}, {S - 1, 0.0f}, {50, 1.0f}};
      std::vector<float> edited = x;
      gpt2::Sae::Edit(sae, {}, clamp).edit(0, n, edited.data());
      for (int t = 0; t < n; ++t) {
        std::vector<float> want(x.begin() + size_t(t) * C, x.begin() + size_t(t + 1) * C);
        for (const auto& c : clamp) {
          const float a = (c.second - all[size_t(t) * S + c.first]) * scale[t];
          for (int i = 0; i < C; ++i) want[i] += a * sae->DecoderRow(c.first)[i];
        }
        REQUIRE(std::memcmp(want.data(), edited.data() + size_t(t) * C, sizeof(float) * C) == 0);
      }
    }
  }
}

}  // namespace gpt2_test

namespace gpt2_test {

TEST_CASE("SAE converter: W_enc over several pieces and source row blocks is the exact transpose",
          "[sae]") {
  // Shapes that cross the converter's 256-row pieces and 32-row source blocks with remainders,
  // each source dtype; the reference is the source read element by element and, for Q8_0, ggml's
  // quantize_row_q8_0_ref written out in tests/convert (convert_test_util.h).
  const struct {
    int d_in, d_sae;
    const char* dtype;
    gpt2::TensorType type;
  } cases[] = {{100, 600, "BF16", gpt2::TensorType::kF32},
               {64, 257, "F16", gpt2::TensorType::kF32},
               {40, 513, "F32", gpt2::TensorType::kF32},
               {96, 300, "F32", gpt2::TensorType::kQ8_0}};
  for (const auto& c : cases) {
    INFO(c.d_in << " x " << c.d_sae << " " << c.dtype);
    std::vector<convert_test::HfTensor> t = {
        {"W_enc", {c.d_in, c.d_sae}, convert_test::Values(1, size_t(c.d_in) * c.d_sae, 0.5f)},
        {"b_enc", {c.d_sae}, convert_test::Values(2, c.d_sae, 0.1f)},
        {"W_dec", {c.d_sae, c.d_in}, convert_test::Values(3, size_t(c.d_sae) * c.d_in, 0.5f)},
        {"b_dec", {c.d_in}, convert_test::Values(4, c.d_in, 0.1f)}};
    std::vector<convert_test::StEntry> entries;
    for (convert_test::HfTensor& h : t) entries.push_back(convert_test::Encode(&h, c.dtype, ""));
    const std::vector<uint8_t> st_bytes = convert_test::WriteSafetensors(entries);
    std::unique_ptr<gpt2::SafetensorsFile> st =
        gpt2::SafetensorsFile::Parse(st_bytes.data(), st_bytes.size());
    const std::string json = R"({"hook_name": "blocks.0.hook_resid_pre", "d_in": )" +
                             std::to_string(c.d_in) + R"(, "d_sae": )" + std::to_string(c.d_sae) +
                             "}";
    gpt2::SaeGgufInMemory conversion(*st, gpt2::SaeConfigFromJson(json), json, c.type,
                                     uint64_t{1} << 30);
    while (conversion.ConvertNext() < conversion.num_tensors()) {
    }
    std::unique_ptr<gpt2::GgufFile> file =
        gpt2::GgufFile::Parse(conversion.output(), conversion.size());
    const gpt2::GgufTensor* w = file->FindTensor("sae.W_enc");
    REQUIRE(w != nullptr);
    REQUIRE(w->type == c.type);
    const std::vector<float>& want = t[0].values;  // [d_in, d_sae], as the stored halves decode
    std::vector<float> row(c.d_in);
    for (int f = 0; f < c.d_sae; ++f) {
      for (int i = 0; i < c.d_in; ++i) row[i] = want[size_t(i) * c.d_sae + f];
      INFO("feature " << f);
      if (c.type == gpt2::TensorType::kF32) {
        REQUIRE(std::memcmp(reinterpret_cast<const float*>(w->data) + size_t(f) * c.d_in,
                            row.data(), sizeof(float) * c.d_in) == 0);
      } else {
        const std::vector<uint8_t> q = convert_test::RefQuantizeQ8_0(row.data(), c.d_in);
        REQUIRE(std::memcmp(w->data + q.size() * f, q.data(), q.size()) == 0);
      }
    }
  }
}

}  // namespace gpt2_test
