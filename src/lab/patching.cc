#include "lab/patching.h"

#include <algorithm>

#include "base/error.h"
#include "lab/probes.h"
#include "lab/prompt_pair.h"

namespace gpt2 {

namespace {

const LabInterventions& Checked(Conversation& c, const std::vector<int>& clean,
                                const std::vector<int>& corrupted, const LabInterventions& iv) {
  CheckPromptPair(clean, corrupted, "patching");
  c.CheckPrompt(static_cast<int>(clean.size()));
  return iv;
}

}  // namespace

PatchingJob::PatchingJob(Conversation& c, const std::vector<int>& clean,
                         const std::vector<int>& corrupted, const LabInterventions& iv)
    : CellJob(c, Checked(c, clean, corrupted, iv)) {
  const int L = c.config().n_layer, T = static_cast<int>(clean.size());
  start_.positions = T;
  start_.total = L * T;
  c.SetInterventions(Interventions());
  // Each prompt's top token, then the two log-probability differences measured as the patched
  // runs' are (in double, from the logits), so a patch that restores all gives 1.
  c.Restart(corrupted);
  start_.other = c.capture().TopIds(T - 1)[0];
  auto diff = [&](int a) {
    return c.LogProbs(T - 1, {a})[0] - c.LogProbs(T - 1, {start_.other})[0];
  };
  c.Restart(clean);
  for (int l = 0; l < L; ++l) streams_.push_back(c.capture().Residual(l));
  start_.answer = c.capture().TopIds(T - 1)[0];
  if (start_.answer == start_.other) {
    throw Error(
        "Both prompts predict the same next token, so there is no difference to bring back: "
        "choose a corrupted prompt whose most likely next token differs.");
  }
  start_.clean_diff = diff(start_.answer);
  c.Restart(corrupted);
  start_.corrupted_diff = diff(start_.answer);

  // Down the positions, then down the blocks: each re-run is kept to what the previous changed.
  std::vector<double> work;
  std::vector<JobCell> cells;
  for (int l = L - 1; l >= 0; --l) {
    for (int p = T - 1; p >= 0; --p) {
      cells.push_back({l, p, 0});
      work.push_back((double(L - l) / L) * (double(T - p) / T));
    }
  }
  // A call never spans two blocks: one call patches one block's stream.
  size_t begin = 0;
  for (size_t end : GroupsByWork(work, kJobBudget)) {
    std::vector<int> blocks;
    for (size_t i = begin; i < end; ++i) {
      if (std::find(blocks.begin(), blocks.end(), cells[i].layer) == blocks.end())
        blocks.push_back(cells[i].layer);
    }
    for (int l : blocks) {
      for (size_t i = begin; i < end; ++i) {
        if (cells[i].layer == l) cells_.push_back(cells[i]);
      }
      group_ends_.push_back(cells_.size());
    }
    begin = end;
  }
}

void PatchingJob::Measure(size_t begin, size_t end) {
  const int l = cells_[begin].layer;
  std::vector<int> positions;
  for (size_t i = begin; i < end; ++i) positions.push_back(cells_[i].index);
  const std::vector<double> lp =
      PatchedLogProbs(c_, l, positions, streams_[l], {start_.answer, start_.other});
  for (size_t i = begin; i < end; ++i) {
    const size_t k = i - begin;
    const double recovered = (lp[2 * k] - lp[2 * k + 1] - start_.corrupted_diff) /
                             (start_.clean_diff - start_.corrupted_diff);
    results_.push_back({l, positions[k], recovered});
  }
}

}  // namespace gpt2
