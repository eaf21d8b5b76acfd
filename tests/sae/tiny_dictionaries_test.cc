// The committed small model's dictionaries (weights/gpt2-tiny-transcoders.gguf and
// weights/gpt2-tiny-sae-blocks.2.hook_resid_pre.gguf, trained by scripts/train_dictionaries.py)
// have the figures weights/README.md states, recomputed here with our engine from the committed
// files: the committed Q8_0 model run as the page runs it (int8 activations), the dictionaries
// loaded by LoadTranscoderFile / LoadSaeFile, spliced in by TranscoderSpliceEdits / Sae::Splice.
//
// The text is tests/data/tiny_heldout.txt (a page neither the model nor the dictionaries trained
// on), its first kWindows windows of 128 tokens, each run as [<|endoftext|>] + window, whose
// <|endoftext|> row counts nowhere, as in the script. The reference is the script's PyTorch
// (float32, the same files read back by its own GGUF reader) on the same windows: its figures are
// the constants below (its log's "tests/data/tiny_heldout.txt" section). The dead fractions are
// this text's (features that fire on none of its 384 tokens), far above the held-out pages'
// figure in the README (the aim of at most 10 % is over those); FVU, L0 and the loss recovered are
// also held to the aims here.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../test_paths.h"
#include "base/error.h"
#include "format/gguf.h"
#include "model/acts.h"
#include "model/run_options.h"
#include "model/session.h"
#include "sae/sae.h"
#include "sae/transcoders.h"
#include "tokenizer/tokenizer.h"

namespace gpt2_test {
namespace {

using gpt2::Acts;
using gpt2::Hook;
using gpt2::HookSet;
using gpt2::StreamEdit;
using gpt2::StreamPoint;

constexpr int kWindow = 128;  // text tokens a window, as the script's WINDOW
constexpr int kWindows = 3;   // as the script's TEST_WINDOWS
constexpr int kEndOfText = 50256;
constexpr int kSaeLayer = 2;

// scripts/train_dictionaries.py's figures on these windows (PyTorch, float32 weights read from
// the committed files).
struct Figures {
  double fvu, l0, dead;
};
constexpr Figures kPyTorchTranscoders[4] = {{0.0177, 19.71, 0.6064},
                                            {0.0136, 22.37, 0.5195},
                                            {0.0416, 22.66, 0.6318},
                                            {0.0526, 18.12, 0.7148}};
constexpr Figures kPyTorchSae = {0.0462, 24.11, 0.4648};
constexpr double kPyTorchLossModel = 5.7492;
constexpr double kPyTorchTranscodersRecovered = 0.9926;
constexpr double kPyTorchSaeRecovered = 0.9988;

// How far our engine may stray from PyTorch: it runs the model's Q8_0 products on int8-rounded
// activations (PyTorch on float32 ones), which moves every stream by up to ~1 % (the script's
// --check-engine), so a feature near zero may fire on a token where PyTorch's did not. Measured
// when committed: FVU within 1e-4, L0 within 0.05, dead within 0.002, losses within 4e-4.
constexpr double kFvuTolerance = 0.003;
constexpr double kL0Tolerance = 0.15;
constexpr double kDeadTolerance = 0.006;       // 6 of 1024 features
constexpr double kLossTolerance = 0.005;       // nats/token
constexpr double kRecoveredTolerance = 0.005;  // fraction of the loss

// The aims (weights/README.md).
constexpr double kMaxFvu = 0.2;
constexpr double kMaxL0 = 32;
constexpr double kMinRecovered = 0.8;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A dictionary's tallies over rows: squared error, the target's sums for its variance, active
// features, features seen active.
struct Tally {
  double err = 0, sum_sq = 0;
  std::vector<double> sum;
  int64_t active = 0, rows = 0;
  std::vector<bool> fired;

  // target [n, C] against its reconstruction, features [n, S].
  void Add(const float* target, const float* recon, const float* features, int n, int C, int S) {
    sum.resize(C);
    fired.resize(S);
    for (int t = 0; t < n; ++t) {
      for (int i = 0; i < C; ++i) {
        const double y = target[int64_t(t) * C + i], d = y - recon[int64_t(t) * C + i];
        err += d * d;
        sum_sq += y * y;
        sum[i] += y;
      }
      for (int f = 0; f < S; ++f) {
        if (features[int64_t(t) * S + f] > 0) {
          ++active;
          fired[f] = true;
        }
      }
    }
    rows += n;
  }
  Figures Result() const {
    double mean_sq = 0;
    for (double s : sum) mean_sq += (s / rows) * (s / rows);
    const double var = sum_sq - rows * mean_sq;
    const double dead = double(std::count(fired.begin(), fired.end(), false)) / fired.size();
    return {err / var, double(active) / rows, dead};
  }
};

// Rows [1, T) of x [T, C]: every row but the <|endoftext|>'s.
const float* Body(const std::vector<float>& x, int C) { return x.data() + C; }

// Rows' mlp_out (or the stream) zeroed from position 1 on: the ablation baselines.
StreamEdit ZeroFromPosition1(int layer, StreamPoint point, int C) {
  StreamEdit e{layer, point, nullptr, nullptr, "zero"};
  e.edit = [C](int pos0, int rows, float* x) {
    for (int r = std::max(0, 1 - pos0); r < rows; ++r) std::fill_n(x + int64_t(r) * C, C, 0.0f);
  };
  return e;
}

TEST_CASE("The small model's committed transcoders and SAE have their stated figures",
          "[sae][tiny]") {
  auto mapping = gpt2::MappedFile::Open(SourcePath("weights/gpt2-tiny-q8_0.gguf"));
  std::shared_ptr<const gpt2::GgufFile> file =
      gpt2::GgufFile::Parse(mapping->data(), mapping->size());
  auto model = gpt2::Model::FromGguf(file);
  const gpt2::Config& c = model->config();
  const int C = c.n_embd, V = c.n_vocab, L = c.n_layer;
  auto set = gpt2::LoadTranscoderFile(SourcePath("weights/gpt2-tiny-transcoders.gguf"), c);
  REQUIRE(set->complete());
  auto sae = gpt2::LoadSaeFile(SourcePath("weights/gpt2-tiny-sae-blocks.2.hook_resid_pre.gguf"), C);
  REQUIRE(sae->config().layer == kSaeLayer);
  REQUIRE(sae->config().point == StreamPoint::kResidPre);

  const std::vector<int> ids =
      gpt2::Tokenizer::FromGguf(*file)->Encode(ReadText(DataPath("tiny_heldout.txt")));
  REQUIRE(ids.size() >= size_t(kWindows * kWindow));

  std::vector<StreamEdit> tc_zero,
      sae_zero{ZeroFromPosition1(kSaeLayer, StreamPoint::kResidPre, C)};
  for (int l = 0; l < L; ++l) tc_zero.push_back(ZeroFromPosition1(l, StreamPoint::kMlpOut, C));
  // The model's own run, every block's transcoder spliced in, every MLP output zero; the SAE
  // spliced in, the stream zero at its hook.
  std::vector<gpt2::Interventions> runs(5);
  runs[1].stream_edits = gpt2::TranscoderSpliceEdits(*set, 1);
  runs[2].stream_edits = tc_zero;
  runs[3].stream_edits = {gpt2::Sae::Splice(sae, 1)};
  runs[4].stream_edits = sae_zero;
  std::vector<double> nll(runs.size());  // summed over the predictions
  std::vector<Tally> tc(L);
  Tally sae_tally;
  gpt2::SaeScratch scratch;
  std::vector<float> features, scales, recon, centred;
  const int T = kWindow + 1, n = kWindow;  // n: the rows counted

  gpt2::Session session(*model);
  for (int w = 0; w < kWindows; ++w) {
    std::vector<int> seq{kEndOfText};
    seq.insert(seq.end(), ids.begin() + w * kWindow, ids.begin() + (w + 1) * kWindow);
    for (size_t k = 0; k < runs.size(); ++k) {
      Acts acts;
      gpt2::RunOptions run;
      run.interventions = &runs[k];
      const HookSet keep =
          k == 0 ? HookSet{Hook::kResidPre, Hook::kResidMid, Hook::kMlpOut, Hook::kLogits}
                 : HookSet{Hook::kLogits};
      gpt2::RecordActs(c, gpt2::Keep{keep}, acts, run);
      session.Reset();
      session.Prefill(seq.data(), T, run);
      REQUIRE(acts.logits.size() == size_t(T) * V);
      // Positions 1..T-2 predict the window's tokens after its first (position 0's prediction
      // never changes, and the last has no target).
      for (int p = 1; p + 1 < T; ++p) {
        const float* z = acts.logits.data() + int64_t(p) * V;
        const float max = *std::max_element(z, z + V);
        double sum = 0;
        for (int v = 0; v < V; ++v) sum += std::exp(double(z[v]) - max);
        nll[k] += std::log(sum) - (double(z[seq[p + 1]]) - max);
      }
      if (k != 0) continue;
      for (int l = 0; l < L; ++l) {
        const gpt2::Sae& t = *set->block(l);
        features.resize(size_t(n) * t.d_sae());
        recon.resize(size_t(n) * C);
        t.Encode(Body(acts.blocks[l].resid_mid, C), n, features.data(), nullptr, scratch);
        t.Decode(features.data(), nullptr, n, recon.data());
        tc[l].Add(Body(acts.blocks[l].mlp_out, C), recon.data(), features.data(), n, C, t.d_sae());
      }
      const float* x = Body(acts.blocks[kSaeLayer].resid_pre, C);
      features.resize(size_t(n) * sae->d_sae());
      scales.resize(n);
      sae->Encode(x, n, features.data(), scales.data(), scratch);
      sae->Decode(features.data(), scales.data(), n, recon.data());
      centred.assign(x, x + int64_t(n) * C);
      for (int r = 0; r < n; ++r) {
        float* row = centred.data() + int64_t(r) * C;
        double mean = 0;
        for (int i = 0; i < C; ++i) mean += row[i];
        for (int i = 0; i < C; ++i) row[i] = static_cast<float>(row[i] - mean / C);
      }
      sae_tally.Add(centred.data(), recon.data(), features.data(), n, C, sae->d_sae());
    }
  }

  const double predictions = double(kWindows) * (kWindow - 1);
  for (double& v : nll) v /= predictions;
  const double tc_recovered = (nll[2] - nll[1]) / (nll[2] - nll[0]);
  const double sae_recovered = (nll[4] - nll[3]) / (nll[4] - nll[0]);
  INFO("loss: model " << nll[0] << ", transcoders " << nll[1] << ", MLPs zero " << nll[2]
                      << ", SAE " << nll[3] << ", stream zero " << nll[4]);
  CHECK(std::abs(nll[0] - kPyTorchLossModel) < kLossTolerance);
  for (int l = 0; l < L; ++l) {
    const Figures f = tc[l].Result();
    INFO("transcoder " << l << ": FVU " << f.fvu << " L0 " << f.l0 << " dead " << f.dead);
    CHECK(std::abs(f.fvu - kPyTorchTranscoders[l].fvu) < kFvuTolerance);
    CHECK(std::abs(f.l0 - kPyTorchTranscoders[l].l0) < kL0Tolerance);
    CHECK(std::abs(f.dead - kPyTorchTranscoders[l].dead) < kDeadTolerance);
    CHECK(f.fvu <= kMaxFvu);
    CHECK(f.l0 <= kMaxL0);
  }
  const Figures s = sae_tally.Result();
  INFO("SAE: FVU " << s.fvu << " L0 " << s.l0 << " dead " << s.dead);
  CHECK(std::abs(s.fvu - kPyTorchSae.fvu) < kFvuTolerance);
  CHECK(std::abs(s.l0 - kPyTorchSae.l0) < kL0Tolerance);
  CHECK(std::abs(s.dead - kPyTorchSae.dead) < kDeadTolerance);
  CHECK(s.fvu <= kMaxFvu);
  CHECK(s.l0 <= kMaxL0);
  INFO("recovered: transcoders " << tc_recovered << ", SAE " << sae_recovered);
  CHECK(std::abs(tc_recovered - kPyTorchTranscodersRecovered) < kRecoveredTolerance);
  CHECK(std::abs(sae_recovered - kPyTorchSaeRecovered) < kRecoveredTolerance);
  CHECK(tc_recovered >= kMinRecovered);
  CHECK(sae_recovered >= kMinRecovered);
}

// The splices' edits see the rows a run gives them: all at once when observed, in pieces when a
// prompt is prefilled in two calls, the last row alone at the last block's MLP when nothing is
// observed. The last position's logits must not depend on that; and a splice from a position
// past the prompt changes nothing.
TEST_CASE("Splicing the small model's dictionaries in does not depend on how the run is cut",
          "[sae][tiny]") {
  auto mapping = gpt2::MappedFile::Open(SourcePath("weights/gpt2-tiny-q8_0.gguf"));
  std::shared_ptr<const gpt2::GgufFile> file =
      gpt2::GgufFile::Parse(mapping->data(), mapping->size());
  auto model = gpt2::Model::FromGguf(file);
  const gpt2::Config& c = model->config();
  auto set = gpt2::LoadTranscoderFile(SourcePath("weights/gpt2-tiny-transcoders.gguf"), c);
  auto sae =
      gpt2::LoadSaeFile(SourcePath("weights/gpt2-tiny-sae-blocks.2.hook_resid_pre.gguf"), c.n_embd);
  CHECK_THROWS_AS(gpt2::Sae::Splice(std::shared_ptr<const gpt2::Sae>(set, set->block(0)), 1),
                  gpt2::Error);
  std::vector<int> seq{kEndOfText};
  const std::vector<int> text =
      gpt2::Tokenizer::FromGguf(*file)->Encode(ReadText(DataPath("tiny_heldout.txt")));
  seq.insert(seq.end(), text.begin(), text.begin() + 40);
  const int T = static_cast<int>(seq.size()), V = c.n_vocab;

  gpt2::Session session(*model);
  // The last position's logits under `iv`: observed in one call, or unobserved from `split` on.
  auto last_logits = [&](const gpt2::Interventions& iv, bool observed, int split) {
    gpt2::RunOptions run;
    run.interventions = &iv;
    Acts acts;
    if (observed) gpt2::RecordActs(c, gpt2::Keep{HookSet{Hook::kLogits}}, acts, run);
    session.Reset();
    if (split > 0) session.Prefill(seq.data(), split, run);
    const float* z = session.Prefill(seq.data() + split, T - split, run);
    return std::vector<float>(z, z + V);
  };
  auto max_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0;
    for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - b[i]));
    return d;
  };

  const gpt2::Interventions plain;
  std::vector<gpt2::Interventions> spliced(2), past(2);
  spliced[0].stream_edits = gpt2::TranscoderSpliceEdits(*set, 1);
  spliced[1].stream_edits = {gpt2::Sae::Splice(sae, 1)};
  past[0].stream_edits = gpt2::TranscoderSpliceEdits(*set, T);
  past[1].stream_edits = {gpt2::Sae::Splice(sae, T)};
  const std::vector<float> model_logits = last_logits(plain, false, 0);
  for (int k = 0; k < 2; ++k) {
    INFO((k == 0 ? "transcoders" : "SAE"));
    const std::vector<float> whole = last_logits(spliced[k], true, 0);
    CHECK(max_diff(whole, model_logits) > 1e-2);  // the splice does change the run
    CHECK(max_diff(last_logits(spliced[k], false, 0), whole) < 1e-4);
    CHECK(max_diff(last_logits(spliced[k], false, 17), whole) < 1e-4);
    CHECK(max_diff(last_logits(spliced[k], true, 17), whole) < 1e-4);
    CHECK(max_diff(last_logits(past[k], false, 0), model_logits) == 0);
  }
}

}  // namespace
}  // namespace gpt2_test
