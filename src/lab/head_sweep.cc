#include "lab/head_sweep.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "lab/probes.h"

namespace gpt2 {

namespace {

// The checks, before the job remembers anything.
const LabInterventions& Checked(Conversation& c, int target, const LabInterventions& iv) {
  c.RequireCaptured("Generate some text with \"capture activations\" on first.");
  if (target < 0 || target >= c.config().n_vocab) {
    throw Error("The target token id " + std::to_string(target) + " is not in the vocabulary.");
  }
  return iv;
}

}  // namespace

HeadSweepJob::HeadSweepJob(Conversation& c, int position, int target, const LabInterventions& iv)
    : CellJob(c, Checked(c, target, iv)) {
  const int L = c.config().n_layer, H = c.config().n_head;
  start_.position = std::max(0, std::min(static_cast<int>(scope_.ids().size()) - 1, position));
  start_.target = target;
  start_.total = L * H;
  // Mean ablation's means: the page's interventions', else the prompt's (none: zero ablation).
  if (iv.mean_ablation) {
    means_ = restore_.head_means;
    const std::vector<int> prompt = c.prompt();
    if (means_.empty() && !prompt.empty()) means_ = c.PlainHeadMeans(prompt);
  }
  // The plain run of the conversation, captured: every probe starts from its stream.
  c.SetInterventions(Interventions());
  c.Recapture(scope_.ids());
  start_.base = c.LogProbs(start_.position, {target})[0];
  // From the last block down: each probe's block is the first its cache differs in, so no
  // block before it runs again.
  std::vector<double> work;
  for (int l = L - 1; l >= 0; --l) {
    for (int h = 0; h < H; ++h) {
      cells_.push_back({l, h, 0});
      work.push_back(double(L - l) / L);
    }
  }
  group_ends_ = GroupsByWork(work, kJobBudget);
}

void HeadSweepJob::Measure(size_t begin, size_t end) {
  std::vector<HeadRef> heads;
  for (size_t i = begin; i < end; ++i) heads.push_back({cells_[i].layer, cells_[i].index});
  const std::vector<double> lp = AblatedLogProbs(c_, heads, start_.position, start_.target, means_);
  for (size_t i = begin; i < end; ++i)
    results_.push_back({cells_[i].layer, cells_[i].index, lp[i - begin]});
}

}  // namespace gpt2
