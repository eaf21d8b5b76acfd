#include "lab/experiment.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "model/generate.h"
#include "model/top_k.h"

namespace gpt2 {

void CheckSampling(const SamplingParams& params) {
  if (!(params.temperature >= 0) || params.top_k < 0 || !(params.top_p > 0 && params.top_p <= 1)) {
    throw Error(
        "Sampling settings out of range: temperature >= 0, top-k >= 0, 0 < top-p <= 1, seed >= 0.");
  }
}

namespace {

// What the model writes from prompt under the conversation's interventions, uncaptured; the
// conversation is then that text.
std::vector<int> SampleIds(Conversation& c, const std::vector<int>& prompt,
                           const SamplingParams& sampling, int max_tokens) {
  c.Reset();
  c.SetCapture(false);
  c.Run(prompt);
  GenerateOptions options;
  options.sampling = sampling;
  options.max_tokens = max_tokens;
  TokenLoop loop(options, c.config().n_vocab, c.config().n_ctx);
  std::vector<int> ids;
  while (!loop.Finished()) {
    const int id = loop.Sample(c.logits());
    ids.push_back(id);
    const TokenLoop::Next next = loop.After(id, true, c.position());
    if (next.run) c.Step(id);
    if (next.stop) break;
  }
  return ids;
}

// ExperimentResult::kl of two [n_vocab] distributions.
double KlDivergence(const std::vector<float>& p, const std::vector<float>& q) {
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] > 0) kl += double(p[i]) * std::log(double(p[i]) / std::max(double(q[i]), 1e-30));
  }
  return std::max(0.0, kl);
}

// The kExperimentTop most probable ids of a distribution and their probabilities.
void TopOf(const std::vector<float>& dist, std::vector<int>* ids, std::vector<float>* probs) {
  LargestIndices(dist.data(), static_cast<int>(dist.size()), kExperimentTop, ids);
  probs->clear();
  for (int id : *ids) probs->push_back(dist[id]);
}

}  // namespace

ExperimentResult Experiment(Conversation& c, const std::vector<int>& prompt,
                            const LabInterventions& iv, int position,
                            const SamplingParams& sampling, int max_tokens) {
  if (c.tokens().empty()) throw Error("Generate some text first, then run the experiment.");
  c.CheckPrompt(static_cast<int>(prompt.size()));
  Conversation::Scope scope(c);
  const Interventions changed = c.Resolve(iv, MeansOf::kPrompt, &prompt);
  CheckSampling(sampling);
  ExperimentResult out;
  c.SetInterventions(Interventions());
  out.text_before = SampleIds(c, prompt, sampling, max_tokens);
  c.SetInterventions(changed);
  out.text_after = SampleIds(c, prompt, sampling, max_tokens);
  // The conversation, plain, then given back under the interventions: the re-run reuses the
  // cache and the stream before the first changed block.
  c.SetInterventions(Interventions());
  c.Restart(scope.ids());
  out.position = std::max(0, std::min(static_cast<int>(scope.ids().size()) - 1, position));
  out.before = c.FinalProbs(out.position);
  scope.RestoreUnder(changed);
  out.from_block = scope.End();
  out.after = c.FinalProbs(out.position);
  out.kl = KlDivergence(out.before, out.after);
  TopOf(out.before, &out.top_before, &out.top_before_probs);
  TopOf(out.after, &out.top_after, &out.top_after_probs);
  for (int id : out.top_after) out.top_after_probs_before.push_back(out.before[id]);
  return out;
}

}  // namespace gpt2
