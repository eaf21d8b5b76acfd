// Activation patching of two prompts of the same length as a job (job.h): the clean stream
// entering each block at each position patched into the corrupted run (probes.h
// PatchedLogProbs), measured as the share of the logit difference it brings back.
#pragma once

#include <vector>

#include "lab/job.h"

namespace gpt2 {

struct PatchingStart {
  int positions = 0, total = 0;
  int answer = 0, other = 0;  // the clean and the corrupted run's most probable next token
  double clean_diff = 0, corrupted_diff = 0;  // log p(answer) - log p(other)
};

class PatchingJob : public CellJob {
 public:
  // The plain model; iv: the page's interventions End gives the conversation back under. Cells
  // (layer, position) down the positions, then down the blocks, value (d - corrupted_diff) /
  // (clean_diff - corrupted_diff) with d the patched run's log p(answer) - log p(other).
  PatchingJob(Conversation& c, const std::vector<int>& clean, const std::vector<int>& corrupted,
              const LabInterventions& iv);
  const PatchingStart& start() const { return start_; }

 private:
  void Measure(size_t begin, size_t end) override;

  PatchingStart start_;
  std::vector<std::vector<float>> streams_;  // the clean run's residual(l), each l
};

}  // namespace gpt2
