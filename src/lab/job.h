// The incremental experiments (head_sweep.h, patching.h, path_patch.h): a job is made (its
// constructor checks, runs what every cell needs and lays out the cells), then each Continue()
// measures the next group of cells, about kJobBudget prefills of work, so the page can show
// progress and cancel in between; End() gives the conversation back through the job's Scope
// (conversation.h), under the page's interventions. A job destroyed unended gives it back too.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "lab/conversation.h"

namespace gpt2 {

// Prefills of work per Continue() (~0.6 s for GPT-2 small at 32 tokens): bounds how long a
// cancel or a progress update waits, while the probes of a call share the unembedding.
constexpr double kJobBudget = 4;

// One measured cell of a job: a head (sweep, path patching: layer, head) or a patch (patching:
// layer, position); value: the log-probability (sweep), the share of the logit difference the
// patch brings back (patching) or m_patched - m_clean (path patching).
struct JobCell {
  int layer = 0, index = 0;
  double value = 0;
};

// Splits items (weights: each one's work in full re-runs of the prompt, in the order run) into
// consecutive groups of about `budget` work each, at least one item per group; returns the end
// index of each group.
std::vector<size_t> GroupsByWork(const std::vector<double>& work, double budget);

class Job {
 public:
  virtual ~Job() = default;
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Runs the next group of cells; returns the cells measured so far.
  int Continue();
  bool done() const { return next_ >= cells_.size(); }
  int total() const { return static_cast<int>(cells_.size()); }
  // The cells measured so far, in the order run.
  const std::vector<JobCell>& results() const { return results_; }
  // The conversation again, captured, under the page's interventions (with no conversation to
  // give back, the job's last run stays).
  void End() { scope_.End(); }
  void Dismiss() { scope_.Dismiss(); }  // ends it giving nothing back

 protected:
  // Remembers the conversation and resolves the page's interventions to give it back under
  // (mean ablation: means over the prompt, which may run it).
  Job(Conversation& c, const LabInterventions& restore);
  // Measures cells_[begin, end) into results_.
  virtual void Measure(size_t begin, size_t end) = 0;

  Conversation& c_;
  Conversation::Scope scope_;
  Interventions restore_;  // what End gives the conversation back under
  std::vector<JobCell> cells_, results_;
  std::vector<size_t> group_ends_;  // cells [end of the previous group, this)
  size_t next_ = 0, group_ = 0;
};

}  // namespace gpt2
