// The lab (src/lab/lab.h) against independent references: every probe and job equals a fresh
// Session's full prefill under the same interventions, intervened runs equal PyTorch's
// (tests/data/golden_interventions.bin, scripts/make_golden.py), and generation equals a
// hand-written Session + Sampler loop. The tiny synthetic model keeps it fast under ASan and wasm.
#include "lab/lab.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../model/golden_file.h"
#include "../model/model_test_util.h"
#include "base/error.h"
#include "tools/common/synthetic_model.h"

namespace gpt2_test {
namespace {

// A fresh full prefill does the same arithmetic as the lab's partial re-runs, in the same order
// per row; f32 against PyTorch as golden_test.cc.
constexpr double kRerunTolerance = 1e-5;
constexpr double kF32Tolerance = 1e-4;

const GoldenFile& Golden() { return GoldenData("golden_interventions.bin"); }

std::vector<int> GoldenIds(const std::string& name) {
  const std::vector<int32_t>& ids = Golden().I32(name);
  return std::vector<int>(ids.begin(), ids.end());
}

// The lab over the tiny synthetic model (no tokenizer: the lab never needs one itself).
struct TinyLab {
  std::vector<uint8_t> bytes =
      gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), gpt2::TensorType::kF32, nullptr);
  std::unique_ptr<gpt2::Lab> lab;
  const gpt2::Model* model = nullptr;
  int L = 0, H = 0, C = 0, V = 0;

  TinyLab() {
    gpt2::LoadedGguf loaded;
    loaded.file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
    loaded.model = gpt2::Model::FromGguf(loaded.file);
    lab = std::make_unique<gpt2::Lab>(std::move(loaded), 1);
    model = &lab->model();
    const gpt2::Config& c = model->config();
    L = c.n_layer, H = c.n_head, C = c.n_embd, V = c.n_vocab;
  }

  // Reset, capture on, the plain model, ids run.
  void RunPlain(const std::vector<int>& ids) {
    lab->SetInterventions({}, gpt2::MeansOf::kCapture);
    lab->Reset();
    lab->SetCapture(true);
    lab->Run(ids);
  }

  // The reference: a fresh session's full prefill of ids under iv; log P(id) at `position`.
  double FreshLogProb(const std::vector<int>& ids, int position, const gpt2::Interventions& iv,
                      int id) const {
    gpt2::Session fresh(*model);
    gpt2::RunOptions run;
    run.interventions = &iv;
    const float* logits = fresh.Prefill(ids.data(), position + 1, run);
    return gpt2::LogProbability(logits, V, id);
  }
};

std::vector<int> Prompt() { return GoldenIds("ids"); }

// Another prompt of the same length: make_golden.py's patch source (shorter) in front of the
// golden prompt's tail.
std::vector<int> OtherPrompt() {
  std::vector<int> ids = Prompt();
  const std::vector<int> source = GoldenIds("patch_source_ids");
  REQUIRE(source.size() < ids.size());
  std::copy(source.begin(), source.end(), ids.begin());
  return ids;
}

TEST_CASE("lab: ablated log-probabilities equal fresh full runs, after any sequence of probes",
          "[lab]") {
  TinyLab t;
  const std::vector<int> ids = Prompt();
  const int T = static_cast<int>(ids.size());
  t.RunPlain(ids);
  const int target = 464;
  const std::vector<float> none;
  // Mixed positions and blocks, up and down, so each probe meets the rows an earlier one left.
  const std::vector<std::pair<int, int>> probes = {{T - 1, 1}, {2, 0}, {T - 1, 0},
                                                   {3, 1},     {1, 1}, {T - 2, 0}};
  for (const auto& [p, l] : probes) {
    for (int h : {0, t.H - 1}) {
      INFO("head " << l << "." << h << " at " << p);
      gpt2::Interventions iv;
      iv.ablate_heads = {{l, h}};
      const double got = t.lab->AblatedLogProbs({{l, h}}, p, target, none).at(0);
      CHECK(got == Approx(t.FreshLogProb(ids, p, iv, target)).margin(kRerunTolerance));
    }
  }
  // Several in one call (their rows share the unembedding), with means.
  const std::vector<float> means = t.lab->HeadMeans();
  std::vector<gpt2::HeadRef> heads;
  for (int l = t.L - 1; l >= 0; --l) {
    for (int h = 0; h < t.H; ++h) heads.push_back({l, h});
  }
  const std::vector<double> got = t.lab->AblatedLogProbs(heads, T - 1, target, means);
  REQUIRE(got.size() == heads.size());
  for (size_t i = 0; i < heads.size(); ++i) {
    gpt2::Interventions iv;
    iv.ablate_heads = {heads[i]};
    iv.head_means = means;
    CHECK(got[i] == Approx(t.FreshLogProb(ids, T - 1, iv, target)).margin(kRerunTolerance));
  }
  // The baseline: log P at a position of the run as captured.
  CHECK(t.lab->LogProbs(2, {target}).at(0) ==
        Approx(t.FreshLogProb(ids, 2, {}, target)).margin(kRerunTolerance));
}

TEST_CASE("lab: two heads knocked out and re-run equal PyTorch", "[lab]") {
  TinyLab t;
  const std::vector<int> ids = Prompt();
  const int T = static_cast<int>(ids.size());
  t.RunPlain(ids);
  t.lab->AblatedLogProbs({{1, 0}, {0, 2}}, 3, 7, {});  // leaves the cache changed
  gpt2::LabInterventions iv;
  iv.iv.ablate_heads = {{0, 1}, {1, 3}};
  t.lab->SetInterventions(iv, gpt2::MeansOf::kCapture);
  CHECK(t.lab->Rerun() == 0);
  const std::vector<float>& want = Golden().F32("iv/ablate_zero/logits");
  for (int id : {0, 464, 50256}) {
    CHECK(t.lab->LogProbs(T - 1, {id}).at(0) ==
          Approx(gpt2::LogProbability(want.data(), t.V, id)).margin(kF32Tolerance));
  }
}

TEST_CASE("lab: patched log-probabilities equal fresh full runs and PyTorch", "[lab]") {
  TinyLab t;
  const std::vector<int> ids = Prompt(), source = OtherPrompt();
  const int T = static_cast<int>(ids.size());
  t.RunPlain(source);
  std::vector<std::vector<float>> streams;
  for (int l = 0; l < t.L; ++l) streams.push_back(t.lab->capture().Residual(l));
  t.RunPlain(ids);
  const std::vector<int> measured = {464, 0, 50256};
  for (int l = t.L - 1; l >= 0; --l) {
    const std::vector<int> positions = {T - 1, 3, 0, 2};
    const std::vector<double> got = t.lab->PatchedLogProbs(l, positions, streams[l], measured);
    REQUIRE(got.size() == positions.size() * measured.size());
    for (size_t i = 0; i < positions.size(); ++i) {
      const int p = positions[i];
      gpt2::Interventions iv;
      iv.patches.push_back({l, p,
                            std::vector<float>(streams[l].begin() + size_t(p) * t.C,
                                               streams[l].begin() + size_t(p + 1) * t.C)});
      for (size_t k = 0; k < measured.size(); ++k) {
        INFO("block " << l << " position " << p << " id " << measured[k]);
        CHECK(got[i * measured.size() + k] ==
              Approx(t.FreshLogProb(ids, T - 1, iv, measured[k])).margin(kRerunTolerance));
      }
    }
  }
  // make_golden.py's patch: block 1's input at position 3 from patch_source_ids (causal: the
  // tail added after it changes nothing there).
  const std::vector<float>& want = Golden().F32("iv/patch/logits");
  const std::vector<double> got = t.lab->PatchedLogProbs(1, {3}, streams[1], {464});
  CHECK(got[0] == Approx(gpt2::LogProbability(want.data(), t.V, 464)).margin(kF32Tolerance));
}

TEST_CASE("lab: probes, then a re-run, then more steps equal a fresh run", "[lab]") {
  TinyLab t;
  std::vector<int> ids = Prompt();
  const int T = static_cast<int>(ids.size());
  t.RunPlain(ids);
  t.lab->AblatedLogProbs({{0, 1}, {1, 2}}, T - 2, 11, {});
  t.lab->PatchedLogProbs(0, {1}, std::vector<float>(size_t(T) * t.C, 0.5f), {11});
  CHECK_THROWS_AS(t.lab->Step(5), gpt2::Error);  // the cache holds a probe's rows
  CHECK(t.lab->Rerun() == 0);
  for (int id : {5, 17, 50256}) {
    t.lab->Step(id);
    ids.push_back(id);
  }
  gpt2::Session fresh(*t.model);
  const float* want = fresh.Prefill(ids.data(), static_cast<int>(ids.size()));
  const int P = static_cast<int>(ids.size());
  REQUIRE(t.lab->capture().n_positions() == P);
  const std::vector<float> got = t.lab->FinalProbs(P - 1);
  for (int id : {0, 5, 464}) {
    CHECK(std::log(double(got[id])) ==
          Approx(gpt2::LogProbability(want, t.V, id)).margin(kRerunTolerance));
  }
  CHECK(t.lab->tokens() == ids);
}

TEST_CASE("lab: the head sweep job equals fresh runs, and gives the conversation back", "[lab]") {
  TinyLab t;
  const std::vector<int> prompt = Prompt();
  gpt2::SamplingParams sampling;
  sampling.temperature = 0;
  gpt2::LabInterventions page;
  page.iv.skip_mlp = {1};  // the page's interventions, restored after the job
  t.lab->StartGeneration(prompt, page, sampling, 3, true);
  while (t.lab->NextToken(false) >= 0) {
  }
  const std::vector<int> conversation = t.lab->tokens();
  const int P = static_cast<int>(conversation.size());
  const int target = 464, position = P - 2;
  const gpt2::HeadSweepStart start = t.lab->StartHeadSweep(position, target, page);
  CHECK(start.total == t.L * t.H);
  CHECK(start.base ==
        Approx(t.FreshLogProb(conversation, position, {}, target)).margin(kRerunTolerance));
  int calls = 0;
  while (!t.lab->job_done()) {
    t.lab->ContinueJob();
    ++calls;
  }
  CHECK(calls >= 1);
  const std::vector<gpt2::JobCell>& cells = t.lab->job_results();
  REQUIRE(static_cast<int>(cells.size()) == start.total);
  CHECK(cells.front().layer == t.L - 1);  // from the last block down
  for (const gpt2::JobCell& cell : cells) {
    gpt2::Interventions iv;
    iv.ablate_heads = {{cell.layer, cell.index}};
    CHECK(cell.value ==
          Approx(t.FreshLogProb(conversation, position, iv, target)).margin(kRerunTolerance));
  }
  t.lab->EndJob();
  CHECK(t.lab->tokens() == conversation);
  CHECK(t.lab->capture().n_positions() == P);
  const std::vector<float> got = t.lab->FinalProbs(P - 1);
  CHECK(std::log(double(got[target])) ==
        Approx(t.FreshLogProb(conversation, P - 1, page.iv, target)).margin(kRerunTolerance));
}

TEST_CASE("lab: the patching job equals fresh runs", "[lab]") {
  TinyLab t;
  const std::vector<int> clean = Prompt(), corrupted = OtherPrompt();
  const int T = static_cast<int>(clean.size());
  const gpt2::PatchingStart start = t.lab->StartPatching(clean, corrupted, {});
  CHECK(start.total == t.L * T);
  auto diff = [&](const std::vector<int>& ids, const gpt2::Interventions& iv) {
    return t.FreshLogProb(ids, T - 1, iv, start.answer) -
           t.FreshLogProb(ids, T - 1, iv, start.other);
  };
  CHECK(start.clean_diff == Approx(diff(clean, {})).margin(kRerunTolerance));
  CHECK(start.corrupted_diff == Approx(diff(corrupted, {})).margin(kRerunTolerance));
  // The clean stream, from a fresh observed run.
  gpt2::Recorder rec;
  gpt2::Session fresh(*t.model);
  fresh.Prefill(clean.data(), T, {rec.Observer()});
  while (t.lab->ContinueJob() < start.total) {
  }
  for (const gpt2::JobCell& cell : t.lab->job_results()) {
    const std::vector<float>& in =
        cell.layer == 0 ? rec.Find("embed", -1)->data : rec.Find("resid_out", cell.layer - 1)->data;
    gpt2::Interventions iv;
    iv.patches.push_back({cell.layer, cell.index,
                          std::vector<float>(in.begin() + size_t(cell.index) * t.C,
                                             in.begin() + size_t(cell.index + 1) * t.C)});
    const double want =
        (diff(corrupted, iv) - start.corrupted_diff) / (start.clean_diff - start.corrupted_diff);
    INFO("block " << cell.layer << " position " << cell.index);
    CHECK(cell.value == Approx(want).margin(1e-3));
  }
  t.lab->EndJob();
  CHECK(t.lab->tokens() == corrupted);  // no conversation to give back: the job's last run stays
}

TEST_CASE("lab: generation equals a hand-written Session + Sampler loop", "[lab]") {
  TinyLab t;
  const std::vector<int> prompt = Prompt();
  const gpt2::SamplingParams sampling{0.9f, 20, 0.95f, 1234};
  const int n = 9;
  t.lab->StartGeneration(prompt, {}, sampling, n, false);
  std::vector<int> got;
  for (int id = t.lab->NextToken(false); id >= 0; id = t.lab->NextToken(false)) got.push_back(id);

  gpt2::Session by_hand(*t.model);
  gpt2::Sampler sampler(sampling);
  const float* logits = by_hand.Prefill(prompt.data(), static_cast<int>(prompt.size()));
  std::vector<int> want;
  bool end_of_text = false;
  for (int i = 0; i < n && !end_of_text; ++i) {
    want.push_back(sampler.Sample(logits, t.V));
    end_of_text = want.back() == gpt2::kEndOfText;
    if (!end_of_text) logits = by_hand.Step(want.back());  // the page runs the last token too
  }
  CHECK(got == want);
  CHECK(t.lab->stop_reason() ==
        (end_of_text ? gpt2::StopReason::kEndOfText : gpt2::StopReason::kMaxTokens));
  CHECK(t.lab->position() == by_hand.position());
  std::vector<int> conversation = prompt;
  conversation.insert(conversation.end(), want.begin(), want.end());
  CHECK(t.lab->conversation() == conversation);

  // Stop between tokens: the token before the stop is not run.
  t.lab->StartGeneration(prompt, {}, sampling, n, false);
  CHECK(t.lab->NextToken(false) == want[0]);
  CHECK(t.lab->NextToken(true) == -1);
  CHECK(t.lab->stop_reason() == gpt2::StopReason::kStoppedByCaller);
  CHECK(t.lab->position() == static_cast<int>(prompt.size()));
}

TEST_CASE("lab: generation stops when the context is full; prompts are checked in one place",
          "[lab]") {
  TinyLab t;
  const int n_ctx = t.model->config().n_ctx;
  gpt2::SamplingParams greedy;
  greedy.temperature = 0;
  t.lab->StartGeneration(std::vector<int>(n_ctx - 2, 100), {}, greedy, 1000, false);
  int produced = 0;
  while (t.lab->NextToken(false) >= 0) ++produced;
  CHECK(t.lab->stop_reason() == gpt2::StopReason::kContextFull);
  CHECK(produced == 3);  // two run to fill the context, the third reported only
  CHECK(t.lab->position() == n_ctx);
  CHECK_THROWS_WITH(t.lab->StartGeneration({}, {}, greedy, 5, false),
                    "The prompt is empty: type at least one character.");
  CHECK_THROWS_WITH(
      t.lab->StartGeneration(std::vector<int>(n_ctx + 1, 100), {}, greedy, 5, false),
      "The prompt is 65 tokens long, longer than the model's context of 64 tokens. Shorten it.");
}

TEST_CASE("lab: the experiment's distributions and texts equal fresh runs", "[lab]") {
  TinyLab t;
  const std::vector<int> prompt = Prompt();
  gpt2::SamplingParams sampling{0.8f, 0, 1.0f, 7};
  t.lab->StartGeneration(prompt, {}, sampling, 4, true);
  while (t.lab->NextToken(false) >= 0) {
  }
  const std::vector<int> conversation = t.lab->tokens();
  gpt2::LabInterventions iv;
  iv.iv.ablate_heads = {{1, 1}};
  iv.mean_ablation = true;  // means over the prompt's plain run
  const gpt2::ExperimentResult r = t.lab->Experiment(prompt, iv, 2, sampling, 5);
  CHECK(r.position == 2);
  CHECK(r.from_block == 1);
  // The means, from a fresh plain run of the prompt.
  gpt2::CaptureStore store;
  store.Init(*t.model);
  {
    gpt2::Session s(*t.model);
    store.Begin(0, static_cast<int>(prompt.size()));
    s.Prefill(prompt.data(), static_cast<int>(prompt.size()), {store.Observer()});
    store.Commit();
  }
  gpt2::Interventions changed = iv.iv;
  changed.head_means = store.HeadMeans();
  for (int id : {0, 464}) {
    CHECK(std::log(double(r.before[id])) ==
          Approx(t.FreshLogProb(conversation, 2, {}, id)).margin(kRerunTolerance));
    CHECK(std::log(double(r.after[id])) ==
          Approx(t.FreshLogProb(conversation, 2, changed, id)).margin(kRerunTolerance));
  }
  auto generate = [&](const gpt2::Interventions& with) {
    gpt2::GenerateOptions options;
    options.sampling = sampling;
    options.max_tokens = 5;
    options.run.interventions = &with;
    gpt2::Session s(*t.model);
    std::vector<int> ids;
    gpt2::Generate(s, prompt, options, [&](int id) {
      ids.push_back(id);
      return true;
    });
    return ids;
  };
  CHECK(r.text_before == generate({}));
  CHECK(r.text_after == generate(changed));
  CHECK(t.lab->tokens() == conversation);  // left holding the conversation, under iv
  CHECK(t.lab->FirstChangedBlock() == 1);
}

TEST_CASE(
    "lab: interventions set over the prompt take generation's means and leave the conversation "
    "captured "
    "under them",
    "[lab]") {
  TinyLab t;
  const std::vector<int> prompt = Prompt();
  t.lab->StartGeneration(prompt, {}, gpt2::SamplingParams{0.8f, 0, 1.0f, 7}, 4, true);
  while (t.lab->NextToken(false) >= 0) {
  }
  const std::vector<int> conversation = t.lab->tokens(), shown = t.lab->conversation();
  gpt2::LabInterventions iv;
  iv.iv.ablate_heads = {{1, 1}};
  iv.mean_ablation = true;
  CHECK(t.lab->SetInterventionsOverPrompt(iv) == 0);  // the means ran the prompt: all again
  CHECK(t.lab->tokens() == conversation);
  CHECK(t.lab->conversation() == shown);
  // The means, from a fresh plain run of the prompt (as generation and "Run again" take them).
  gpt2::CaptureStore store;
  store.Init(*t.model);
  {
    gpt2::Session s(*t.model);
    store.Begin(0, static_cast<int>(prompt.size()));
    s.Prefill(prompt.data(), static_cast<int>(prompt.size()), {store.Observer()});
    store.Commit();
  }
  gpt2::Interventions changed = iv.iv;
  changed.head_means = store.HeadMeans();
  REQUIRE(t.lab->interventions().head_means.size() == changed.head_means.size());
  for (size_t i = 0; i < changed.head_means.size(); ++i) {
    CHECK(t.lab->interventions().head_means[i] == Approx(changed.head_means[i]).margin(1e-6));
  }
  const int last = static_cast<int>(conversation.size()) - 1;
  REQUIRE(t.lab->capture().n_positions() == last + 1);
  for (int id : {0, 464}) {
    CHECK(std::log(double(t.lab->FinalProbs(last)[id])) ==
          Approx(t.FreshLogProb(conversation, last, changed, id)).margin(kRerunTolerance));
  }
  // Without mean ablation nothing runs in between: only the blocks from the first changed one.
  iv.mean_ablation = false;
  iv.iv.ablate_heads.clear();
  iv.iv.skip_mlp = {1};
  CHECK(t.lab->SetInterventionsOverPrompt(iv) == 1);
  CHECK(std::log(double(t.lab->FinalProbs(last)[464])) ==
        Approx(t.FreshLogProb(conversation, last, iv.iv, 464)).margin(kRerunTolerance));
}

// "Run again"'s numbers from the two distributions, each by a plain loop of its own: KL(before ||
// after) with the intervened probability floored at 1e-30, and the ten most probable tokens by a
// full sort (descending, ties to the lower id).
TEST_CASE("lab: the experiment's KL and top lists equal plain loops over its distributions",
          "[lab]") {
  TinyLab t;
  const std::vector<int> prompt = Prompt();
  gpt2::SamplingParams sampling{0.8f, 0, 1.0f, 7};
  t.lab->StartGeneration(prompt, {}, sampling, 4, true);
  while (t.lab->NextToken(false) >= 0) {
  }
  gpt2::LabInterventions iv;
  iv.iv.ablate_heads = {{0, 0}, {1, 1}};
  iv.iv.skip_mlp = {0};
  const gpt2::ExperimentResult r = t.lab->Experiment(prompt, iv, 3, sampling, 2);
  REQUIRE(static_cast<int>(r.before.size()) == t.V);
  REQUIRE(static_cast<int>(r.after.size()) == t.V);

  double kl = 0;
  for (int i = 0; i < t.V; ++i) {
    const double p = r.before[i], q = r.after[i];
    if (p > 0) kl += p * std::log(p / (q > 1e-30 ? q : 1e-30));
  }
  if (kl < 0) kl = 0;
  CHECK(kl > 1e-3);  // the interventions moved the prediction
  CHECK(r.kl == Approx(kl).epsilon(1e-12));

  auto top = [&](const std::vector<float>& dist) {
    std::vector<int> order(dist.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return dist[a] > dist[b] || (dist[a] == dist[b] && a < b); });
    order.resize(gpt2::kExperimentTop);
    return order;
  };
  const std::vector<int> top_before = top(r.before), top_after = top(r.after);
  CHECK(r.top_before == top_before);
  CHECK(r.top_after == top_after);
  REQUIRE(r.top_before_probs.size() == top_before.size());
  REQUIRE(r.top_after_probs.size() == top_after.size());
  REQUIRE(r.top_after_probs_before.size() == top_after.size());
  for (size_t k = 0; k < top_before.size(); ++k) {
    CHECK(r.top_before_probs[k] == r.before[top_before[k]]);
    CHECK(r.top_after_probs[k] == r.after[top_after[k]]);
    CHECK(r.top_after_probs_before[k] == r.before[top_after[k]]);
  }
  CHECK(r.top_before != r.top_after);  // the lists differ, so each is read from its own side
}

TEST_CASE(
    "lab: attribution of the conversation sums to the fresh run's logit, under the page's "
    "interventions",
    "[lab]") {
  TinyLab t;
  const std::vector<int> prompt = Prompt();
  gpt2::SamplingParams greedy;
  greedy.temperature = 0;
  gpt2::LabInterventions iv;
  iv.iv.ablate_heads = {{0, 2}};
  iv.mean_ablation = true;
  t.lab->StartGeneration(prompt, iv, greedy, 2, true);
  while (t.lab->NextToken(false) >= 0) {
  }
  const std::vector<int> conversation = t.lab->tokens();
  const int P = static_cast<int>(conversation.size());
  const gpt2::Attribution a = t.lab->AttributeConversation(iv, 3, 464);
  CHECK(a.position == 3);
  CHECK(a.target == 464);
  double sum = 0;
  for (const gpt2::AttributionComponent& c : a.components) sum += c.value;
  gpt2::Session fresh(*t.model);
  gpt2::RunOptions run;
  run.interventions = &t.lab->interventions();
  REQUIRE(t.lab->interventions().head_means.size() == size_t(t.L) * t.C);  // the prompt's means
  const float* logits = fresh.Prefill(conversation.data(), 4, run);
  CHECK(sum == Approx(logits[464]).margin(1e-3));
  CHECK(a.logit == Approx(logits[464]).margin(kRerunTolerance));
  CHECK(t.lab->tokens() == conversation);  // the conversation again, captured
  CHECK(t.lab->capture().n_positions() == P);
}

TEST_CASE("lab: groups of work stay within the budget, at least one item each", "[lab]") {
  CHECK(gpt2::GroupsByWork({}, 4).empty());
  CHECK(gpt2::GroupsByWork({5, 1, 1, 3, 0.5}, 4) == std::vector<size_t>{1, 3, 5});
  CHECK(gpt2::GroupsByWork({1, 1, 1, 1, 1}, 2) == std::vector<size_t>{2, 4, 5});
}

}  // namespace
}  // namespace gpt2_test
