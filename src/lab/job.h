// The lab's stepped computations: a job is made (its constructor checks, runs what every step
// needs and lays out the steps), then each Continue() runs the next step, short enough that the
// page can show progress and cancel in between, and End() gives the conversation back. The Lab
// holds one job at a time (lab.h). Its kinds:
//   CellJob   the experiments that measure cells (head_sweep.h, patching.h, path_patch.h): each
//             step measures the next group of cells, about kJobBudget prefills of work; End()
//             gives the conversation back through the job's Scope (conversation.h), under the
//             page's interventions, and a cell job destroyed unended gives it back too.
//   GraphJob  the attribution graph (graph.h), a step of its build's phase at a time; it gives
//             the conversation back as soon as it has run the real model, so End() has nothing
//             left to do.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "lab/conversation.h"

namespace gpt2 {

// Where a job stands: `done` of the `total` steps of its current phase (a cell job: cells
// measured), that phase's name ("" for a job of one phase; the graph's:
// AttributionGraphBuild::PhaseName) and whether it has finished.
struct JobProgress {
  const char* phase = "";
  int done = 0, total = 0;
  bool finished = false;
};

class Job {
 public:
  virtual ~Job() = default;
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Runs the next step; nothing once finished.
  virtual void Continue() = 0;
  virtual JobProgress progress() const = 0;
  bool done() const { return progress().finished; }
  // The conversation back, as the job's kind says above.
  virtual void End() {}
  // Ends it giving nothing back (there is no conversation left to give it to).
  virtual void Dismiss() {}

 protected:
  Job() = default;
};

// Prefills of work per CellJob step (~0.6 s for GPT-2 small at 32 tokens): bounds how long a
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

class CellJob : public Job {
 public:
  void Continue() override;  // the next group of cells
  JobProgress progress() const override {
    return {"", static_cast<int>(results_.size()), total(), next_ >= cells_.size()};
  }
  int total() const { return static_cast<int>(cells_.size()); }
  // The cells measured so far, in the order run.
  const std::vector<JobCell>& results() const { return results_; }
  // The conversation again, captured, under the page's interventions (with no conversation to
  // give back, the job's last run stays).
  void End() override { scope_.End(); }
  void Dismiss() override { scope_.Dismiss(); }

 protected:
  // Remembers the conversation and resolves the page's interventions to give it back under
  // (mean ablation: means over the prompt, which may run it).
  CellJob(Conversation& c, const LabInterventions& restore);
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
