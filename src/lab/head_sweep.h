// "Which heads matter" (the page's head sweep) as a cell job (job.h's CellJob): every head
// knocked out alone (probes.h AblatedLogProbs), log P(target) at a position of the
// conversation's plain run.
#pragma once

#include <vector>

#include "lab/job.h"

namespace gpt2 {

struct HeadSweepStart {
  int position = 0, target = 0, total = 0;
  double base = 0;  // log P(target) of the plain model
};

class HeadSweepJob : public CellJob {
 public:
  // position clamped to the conversation, which must be captured; the plain model otherwise;
  // iv: the page's interventions (their mean_ablation chooses mean over zero ablation, means
  // over the prompt) that End gives the conversation back under. Cells: (layer, head) from the
  // last block down, value log P(target).
  HeadSweepJob(Conversation& c, int position, int target, const LabInterventions& iv);
  const HeadSweepStart& start() const { return start_; }

 private:
  void Measure(size_t begin, size_t end) override;

  HeadSweepStart start_;
  std::vector<float> means_;
};

}  // namespace gpt2
