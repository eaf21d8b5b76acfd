#include "lab/job.h"

namespace gpt2 {

std::vector<size_t> GroupsByWork(const std::vector<double>& work, double budget) {
  std::vector<size_t> ends;
  double sum = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    const bool open = ends.empty() ? i > 0 : i > ends.back();
    if (open && sum + work[i] > budget) {
      ends.push_back(i);
      sum = 0;
    }
    sum += work[i];
  }
  if (!work.empty()) ends.push_back(work.size());
  return ends;
}

CellJob::CellJob(Conversation& c, const LabInterventions& restore) : c_(c), scope_(c) {
  restore_ = c.Resolve(restore, MeansOf::kPrompt);
  scope_.RestoreUnder(restore_);
}

void CellJob::Continue() {
  if (next_ >= cells_.size()) return;
  const size_t end = group_ends_[group_];
  Measure(next_, end);
  next_ = end;
  ++group_;
}

}  // namespace gpt2
