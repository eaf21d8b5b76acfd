#include "lab/experiment.h"

#include <algorithm>

#include "base/error.h"
#include "model/generate.h"

namespace gpt2 {

void CheckSampling(const SamplingParams& params) {
  if (!(params.temperature >= 0) || params.top_k < 0 || !(params.top_p > 0 && params.top_p <= 1)) {
    throw Error("Sampling settings out of range: temperature >= 0, top-k >= 0, 0 < top-p <= 1, seed >= 0.");
  }
}

namespace {

// What the model writes from prompt under the conversation's interventions, uncaptured; the
// conversation is then that text.
std::vector<int> SampleIds(Conversation& c, const std::vector<int>& prompt, const SamplingParams& sampling,
                           int max_tokens) {
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

}  // namespace

ExperimentResult Experiment(Conversation& c, const std::vector<int>& prompt, const LabInterventions& iv,
                            int position, const SamplingParams& sampling, int max_tokens) {
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
  return out;
}

}  // namespace gpt2
