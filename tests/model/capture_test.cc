// The page's capture store and the shared top-k helper (src/model/capture.h), natively (and
// under AddressSanitizer, and in wasm under Node): filled by the forward pass of the tiny model
// in chunks as the page fills it (prefill, then steps), and checked against PyTorch's tensors
// in tests/data/golden_tiny.bin, with the statistics recomputed here from those tensors.
#include "model/capture.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "golden_file.h"
#include "model/session.h"
#include "model_test_util.h"
#include "tools/common/synthetic_model.h"

namespace gpt2_test {
namespace {

const GoldenFile& Golden() { return GoldenData("golden_tiny.bin"); }

// The obvious top-k: sort everything, softmax in double.
void SortedTopK(const std::vector<float>& logits, int k, std::vector<int>* ids,
                std::vector<float>* probs) {
  std::vector<int> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  const double m = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(x - m);
  ids->assign(k, -1);
  probs->assign(k, 0.0f);
  for (int i = 0; i < k && i < static_cast<int>(logits.size()); ++i) {
    (*ids)[i] = order[i];
    (*probs)[i] = static_cast<float>(std::exp(logits[order[i]] - m) / sum);
  }
}

TEST_CASE("TopProbabilities equals a full sort, ties to the lower id", "[model][capture]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(0, 40);  // few distinct values: many ties
  for (int n : {1, 3, 10, 11, 1000}) {
    for (int k : {1, 5, 10, 12, 65, 1000, 1200}) {  // above 64: the sorting path
      INFO("n " << n << " k " << k);
      std::vector<float> logits(n);
      for (float& x : logits) x = level(rng) * 0.25f - 5.0f;
      std::vector<int> want_ids, got_ids(k);
      std::vector<float> want_probs, got_probs(k);
      SortedTopK(logits, k, &want_ids, &want_probs);
      gpt2::TopProbabilities(logits.data(), n, k, got_ids.data(), got_probs.data());
      CHECK(got_ids == want_ids);
      for (int i = 0; i < k; ++i) CHECK(got_probs[i] == Approx(want_probs[i]).margin(1e-7));
    }
  }
}

TEST_CASE("the capture store holds PyTorch's activations and statistics", "[model][capture]") {
  const gpt2::Model& model = TinyModel();
  const gpt2::Config& c = model.config();
  const int L = c.n_layer, C = c.n_embd, H = c.n_head, V = c.n_vocab;
  const std::vector<int32_t>& ids32 = Golden().I32("p3/ids");
  const std::vector<int> ids(ids32.begin(), ids32.end());
  const int P = static_cast<int>(ids.size());

  gpt2::CaptureStore store;
  store.Init(model);
  gpt2::Session session(model);
  // As the page: the prompt's first 7 tokens in one prefill, then steps, watched by the store
  // (no attention scores, no logits: the top probabilities below come from the final stream).
  gpt2::RunOptions run;
  store.Watch(run);
  store.Begin(0, 7);
  session.Prefill(ids.data(), 7, run);
  store.Commit();
  for (int p = 7; p < P; ++p) {
    store.Begin(p, 1);
    session.Step(ids[p], run);
    store.Commit();
  }
  REQUIRE(store.n_positions() == P);
  CHECK_THROWS_AS(store.Begin(P + 1, 1), gpt2::Error);  // a gap is refused

  // Residual streams against PyTorch's.
  std::vector<const std::vector<float>*> resid = {&Golden().F32("p3/embed")};
  for (int l = 0; l < L; ++l)
    resid.push_back(&Golden().F32("p3/blk" + std::to_string(l) + "/resid_out"));
  for (int r = 0; r <= L; ++r) {
    REQUIRE(store.Residual(r).size() == resid[r]->size());
    CHECK(CheckTensor("residual " + std::to_string(r), store.Residual(r).data(), resid[r]->data(),
                      static_cast<int64_t>(resid[r]->size()), 1e-4));
  }
  CHECK_THROWS_AS(store.Residual(L + 1), gpt2::Error);

  // Norms and LayerNorm statistics recomputed here from the golden streams.
  const std::vector<float> norms = store.ResidualNorms();
  REQUIRE(norms.size() == size_t(L + 1) * P);
  const std::vector<float> stats = store.LayerNormStats();
  REQUIRE(stats.size() == size_t(2 * L + 1) * P * 2);
  for (int p = 0; p < P; ++p) {
    for (int r = 0; r <= L; ++r) {
      double s = 0;
      for (int i = 0; i < C; ++i) s += double((*resid[r])[p * C + i]) * (*resid[r])[p * C + i];
      CHECK(norms[size_t(r) * P + p] == Approx(std::sqrt(s)).epsilon(1e-5));
    }
    for (int row = 0; row < 2 * L + 1; ++row) {
      const std::vector<float>& in =
          row == 2 * L
              ? *resid[L]
              : (row % 2 == 0 ? *resid[row / 2]
                              : Golden().F32("p3/blk" + std::to_string(row / 2) + "/resid_attn"));
      double mean = 0, var = 0;
      for (int i = 0; i < C; ++i) mean += in[p * C + i];
      mean /= C;
      for (int i = 0; i < C; ++i) var += (in[p * C + i] - mean) * (in[p * C + i] - mean);
      const float* got = stats.data() + (size_t(row) * P + p) * 2;
      CHECK(got[0] == Approx(mean).margin(1e-5));
      CHECK(got[1] == Approx(std::sqrt(var / C)).epsilon(1e-4));
    }
  }

  // Norms of each sublayer's output at each position, against PyTorch's tensors.
  const std::vector<float> sublayer = store.SublayerNorms();
  REQUIRE(sublayer.size() == size_t(L) * P * 4);
  for (int l = 0; l < L; ++l) {
    const char* const names[4] = {"ln1", "attn_out", "ln2", "mlp_out"};
    for (int k = 0; k < 4; ++k) {
      const std::vector<float>& t = Golden().F32("p3/blk" + std::to_string(l) + "/" + names[k]);
      for (int p = 0; p < P; ++p) {
        double s = 0;
        for (int i = 0; i < C; ++i) s += double(t[size_t(p) * C + i]) * t[size_t(p) * C + i];
        INFO(names[k] << " block " << l << " position " << p);
        CHECK(sublayer[(size_t(l) * P + p) * 4 + k] == Approx(std::sqrt(s)).epsilon(1e-4));
      }
    }
  }

  // Attention rows and final top probabilities.
  for (int l = 0; l < L; ++l) {
    const std::vector<float>& probs =
        Golden().F32("p3/blk" + std::to_string(l) + "/attn_probs");  // [H, P, P]
    for (int p = 0; p < P; ++p) {
      const float* got = store.Attention(l, p);
      for (int h = 0; h < H; ++h) {
        for (int j = 0; j <= p; ++j) {
          CHECK(got[h * (p + 1) + j] == Approx(probs[(size_t(h) * P + p) * P + j]).margin(1e-5));
        }
      }
    }
  }
  const std::vector<float>& logits = Golden().F32("p3/logits");
  for (int p = 0; p < P; ++p) {
    std::vector<int> want_ids;
    std::vector<float> want_probs;
    SortedTopK(
        std::vector<float>(logits.begin() + size_t(p) * V, logits.begin() + size_t(p + 1) * V),
        gpt2::CaptureStore::kTopProbs, &want_ids, &want_probs);
    for (int k = 0; k < gpt2::CaptureStore::kTopProbs; ++k) {
      CHECK(store.TopIds(p)[k] == want_ids[k]);
      CHECK(store.TopProbs(p)[k] == Approx(want_probs[k]).margin(1e-5));
    }
  }
  CHECK_THROWS_AS(store.TopIds(P), gpt2::Error);
  CHECK_THROWS_AS(store.Attention(L, 0), gpt2::Error);

  // Mean head outputs over the positions, as mean ablation uses them.
  const std::vector<float> means = store.HeadMeans();
  REQUIRE(means.size() == size_t(L) * C);
  for (int l = 0; l < L; ++l) {
    const std::vector<float>& heads = Golden().F32("p3/blk" + std::to_string(l) + "/attn_heads");
    for (int i = 0; i < C; ++i) {
      double s = 0;
      for (int p = 0; p < P; ++p) s += heads[size_t(p) * C + i];
      CHECK(means[size_t(l) * C + i] == Approx(s / P).margin(1e-5));
    }
  }

  // The logit lens window against PyTorch's lens (top 5).
  std::vector<int> lens_ids;
  std::vector<float> lens_probs;
  store.LogitLensWindow(model, 2, 6, 0, L, 5, &lens_ids, &lens_probs);
  const std::vector<int32_t>& gold_ids = Golden().I32("p3/lens_ids");  // [L, P, 5]
  const std::vector<float>& gold_probs = Golden().F32("p3/lens_probs");
  REQUIRE(lens_ids.size() == size_t(L) * 4 * 5);
  for (int l = 0; l < L; ++l) {
    for (int t = 0; t < 4; ++t) {
      for (int k = 0; k < 5; ++k) {
        CHECK(lens_ids[(size_t(l) * 4 + t) * 5 + k] == gold_ids[(size_t(l) * P + 2 + t) * 5 + k]);
        CHECK(lens_probs[(size_t(l) * 4 + t) * 5 + k] ==
              Approx(gold_probs[(size_t(l) * P + 2 + t) * 5 + k]).margin(1e-5));
      }
    }
  }
  // A range of blocks: those blocks' rows of the same golden lens.
  store.LogitLensWindow(model, 2, 6, 1, L, 5, &lens_ids, &lens_probs);
  REQUIRE(lens_ids.size() == size_t(L - 1) * 4 * 5);
  for (int l = 1; l < L; ++l) {
    for (int t = 0; t < 4; ++t) {
      CHECK(lens_ids[(size_t(l - 1) * 4 + t) * 5] == gold_ids[(size_t(l) * P + 2 + t) * 5]);
      CHECK(lens_probs[(size_t(l - 1) * 4 + t) * 5] ==
            Approx(gold_probs[(size_t(l) * P + 2 + t) * 5]).margin(1e-5));
    }
  }
  CHECK_THROWS_AS(store.LogitLensWindow(model, 0, P + 1, 0, L, 5, &lens_ids, &lens_probs),
                  gpt2::Error);
  CHECK_THROWS_AS(store.LogitLensWindow(model, 0, P, 1, 1, 5, &lens_ids, &lens_probs), gpt2::Error);
  CHECK_THROWS_AS(store.LogitLensWindow(model, 0, P, 0, L + 1, 5, &lens_ids, &lens_probs),
                  gpt2::Error);

  // An aborted pass leaves the store as it was; Clear empties it.
  store.Begin(P, 1);
  store.Abort();
  CHECK(store.n_positions() == P);
  CHECK(store.Residual(0).size() == size_t(P) * C);
  store.Clear();
  CHECK(store.n_positions() == 0);
  CHECK_THROWS_AS(store.HeadMeans(), gpt2::Error);
}

// The store recomputes attention rows from the queries and keys it keeps; a view must still
// show the probabilities the run computed, to the bit (PyTorch's are checked above), for a
// prompt, its steps, and both weight kinds (Q8_0 quantizes the activations of q and k).
TEST_CASE("the capture store's attention rows are the run's own probabilities",
          "[model][capture]") {
  // One model for each KV cache format: f32, f16 and 8 bits (Config::kv_cache).
  for (const gpt2::TensorType type :
       {gpt2::TensorType::kF32, gpt2::TensorType::kF16, gpt2::TensorType::kQ8_0}) {
    auto m = LoadModelBytes(gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), type, nullptr));
    const gpt2::Model& model = *m->model;
    const int L = model.config().n_layer, H = model.config().n_head;
    // A prefill of 17 (more than one 16-row tile of every kernel), then steps.
    const std::vector<int> ids = {464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13, 198,
                                  464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13};
    constexpr int kPrefill = 17;
    gpt2::CaptureStore store;
    store.Init(model);
    gpt2::Session session(model);
    gpt2::RunOptions run;
    store.Watch(run);
    run.observe_probs = true;  // the store does not ask for them; the check here does
    const gpt2::ActivationObserver to_store = run.observer;
    std::vector<std::vector<float>> want(L);  // [L][P rows of H * (p + 1)] as the run reported
    run.observer = [&](const gpt2::Activation& a) {
      to_store(a);
      if (std::string(a.name) != "attn_probs") return;
      const int64_t T = a.shape[1], n_keys = a.shape[2];
      for (int64_t t = 0; t < T; ++t) {
        const int64_t p = a.pos0 + t;
        for (int64_t h = 0; h < H; ++h) {
          const float* row = a.data + (h * T + t) * n_keys;
          want[a.layer].insert(want[a.layer].end(), row, row + p + 1);
        }
      }
    };
    store.Begin(0, kPrefill);
    session.Prefill(ids.data(), kPrefill, run);
    store.Commit();
    for (int p = kPrefill; p < static_cast<int>(ids.size()); ++p) {
      store.Begin(p, 1);
      session.Step(ids[p], run);
      store.Commit();
    }
    for (int l = 0; l < L; ++l) {
      size_t offset = 0;
      for (int p = 0; p < store.n_positions(); ++p) {
        INFO(gpt2::GgmlTypeName(static_cast<uint32_t>(type))
             << " block " << l << " position " << p);
        const size_t n = size_t(H) * (p + 1);
        const float* got = store.Attention(l, p);
        CHECK(std::memcmp(got, want[l].data() + offset, n * sizeof(float)) == 0);
        for (int h = 0; h < H; ++h) {
          CHECK(std::memcmp(store.HeadAttention(l, h, p),
                            want[l].data() + offset + size_t(h) * (p + 1),
                            (p + 1) * sizeof(float)) == 0);
        }
        offset += n;
      }
    }
    CHECK_THROWS_AS(store.HeadAttention(0, H, 0), gpt2::Error);
    CHECK_THROWS_AS(store.HeadAttention(0, -1, 0), gpt2::Error);
    CHECK_THROWS_AS(store.HeadAttention(0, 0, store.n_positions()), gpt2::Error);
  }
}

TEST_CASE("the recorder keeps every reported tensor", "[model][capture]") {
  gpt2::Recorder recorder;
  gpt2::Session session(TinyModel());
  const int ids[] = {464, 2068, 7586};
  session.Prefill(ids, 3, {recorder.Observer()});
  const int L = TinyModel().config().n_layer;
  CHECK(recorder.tensors().size() == size_t(15 * L + 3));
  const gpt2::RecordedTensor* probs = recorder.Find("attn_probs", 1);
  REQUIRE(probs != nullptr);
  CHECK(probs->shape == std::vector<int64_t>{4, 3, 3});
  CHECK(probs->data.size() == 4 * 3 * 3);
  CHECK(recorder.Find("attn_probs", 2) == nullptr);
}

}  // namespace
}  // namespace gpt2_test

namespace gpt2_test {
namespace {

// The page's store takes a long prompt in Session::kPrefillChunk pieces (CaptureStore::Watch);
// what it keeps must be what one observed pass of the whole prompt (the pass checked against
// PyTorch above) gives it: the same bits for every block, the same final top 10.
TEST_CASE("the capture store takes a long prompt in chunks with one pass's values",
          "[model][capture][long]") {
  gpt2::Config config = gpt2::TinyTestConfig();
  config.n_ctx = 3 * gpt2::Session::kPrefillChunk;
  auto m = LoadModelBytes(gpt2::SyntheticModelBytes(config, gpt2::TensorType::kQ8_0, nullptr));
  const gpt2::Model& model = *m->model;
  const int n = 2 * gpt2::Session::kPrefillChunk + 77, L = config.n_layer, F = config.n_ff;
  std::vector<int> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = int((uint32_t(i) * 2654435761u) % uint32_t(config.n_vocab));

  gpt2::CaptureStore one_pass, chunked;
  one_pass.Init(model);
  chunked.Init(model);
  gpt2::Session a(model), b(model);
  one_pass.Begin(0, n);
  a.Prefill(ids.data(), n, {one_pass.Observer()});
  one_pass.Commit();
  gpt2::RunOptions run;
  chunked.Watch(run);
  int reports = 0;
  const gpt2::ActivationObserver store = run.observer;
  run.observer = [&](const gpt2::Activation& act) {
    if (std::string(act.name) == "embed") ++reports;
    store(act);
  };
  chunked.Begin(0, n);
  b.Prefill(ids.data(), n, run);
  chunked.Commit();
  CHECK(reports == 3);  // it did run in three pieces
  REQUIRE(chunked.n_positions() == n);

  for (int r = 0; r <= L; ++r) CHECK(chunked.Residual(r) == one_pass.Residual(r));
  for (int l = 0; l < L; ++l) {
    for (int p : {0, 127, 128, 200, 255, 256, n - 1}) {
      INFO("block " << l << " position " << p);
      const size_t row = size_t(config.n_head) * (p + 1);
      CHECK(std::equal(chunked.Attention(l, p), chunked.Attention(l, p) + row,
                       one_pass.Attention(l, p)));
      CHECK(std::equal(chunked.MlpActivations(l, p), chunked.MlpActivations(l, p) + F,
                       one_pass.MlpActivations(l, p)));
    }
  }
  for (int p : {0, 200, n - 1}) {
    CHECK(std::equal(chunked.TopIds(p), chunked.TopIds(p) + gpt2::CaptureStore::kTopProbs,
                     one_pass.TopIds(p)));
  }
}

TEST_CASE("the hook table names every observed tensor, ours and TransformerLens's",
          "[model][capture]") {
  for (int i = 0; i < gpt2::kNumHooks; ++i) {
    const gpt2::Hook h = static_cast<gpt2::Hook>(i);
    REQUIRE(gpt2::Info(h).hook == h);  // the table is in the enum's order
    gpt2::Hook found;
    REQUIRE(gpt2::FindHook(gpt2::HookName(h), &found));
    REQUIRE(found == h);
  }
  CHECK(gpt2::LensName(gpt2::Hook::kResidMid, 3) == "blocks.3.hook_resid_mid");
  CHECK(gpt2::LensName(gpt2::Hook::kAttnHeads, 0) == "blocks.0.attn.hook_z");
  CHECK(gpt2::LensName(gpt2::Hook::kLnFinal, -1) == "ln_final.hook_normalized");
  gpt2::Hook none;
  CHECK_FALSE(gpt2::FindHook("resid_mid", &none));  // TransformerLens's name, not ours
  // Every tensor a forward reports carries its hook, named by the table.
  gpt2::Session session(TinyModel());
  const int ids[] = {464, 2068};
  int reports = 0;
  session.Prefill(ids, 2, {[&](const gpt2::Activation& a) {
                    ++reports;
                    REQUIRE(std::string(a.name) == gpt2::HookName(a.hook));
                    REQUIRE((a.layer >= 0) == gpt2::Info(a.hook).per_block);
                  }});
  CHECK(reports == 15 * TinyModel().config().n_layer + 3);
}

}  // namespace
}  // namespace gpt2_test
