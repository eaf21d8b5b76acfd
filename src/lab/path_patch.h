// Path patching (Wang et al.'s IOI paper, as ARENA's exercises and TransformerLens define it):
// how much of a clean/corrupted difference flows from one sender head to chosen receivers.
//   1. run clean and corrupted, keeping every head's output (blocks.L.attn.hook_z);
//   2. run clean with the sender's output taken from the corrupted run and every other head's
//      output frozen at its clean value (MLPs and LayerNorms recomputed); keep the receivers'
//      inputs (their q, k or v), or for `logits` the final residual stream;
//   3. run clean with only the receivers' inputs replaced by those of step 2 (everything after
//      them recomputed); for `logits`, unembed step 2's final stream.
// The metric m = logit[last, target] - logit[last, contrast] (no contrast: the target's logit;
// default target: the clean run's most probable next token), as `gpt2 atp` takes it.
//
// Here as jobs over a conversation (job.h): the sweep of every sender (PathPatchSweep), one
// sender's paths to each later head alone (SenderPathsJob), and one sender's run (PathPatch),
// through the model's interventions (model/run_options.h):
// frozen attention from the sender's block on, the sender's output as a head patch, receivers'
// inputs as head patches. With every head frozen after the sender, positions no longer meet, so
// for `logits` step 2 runs the last position alone: a lone row through the blocks from the
// sender's (a sweep of GPT-2 small's 144 senders at 16 tokens is ~15 prefills' work).
#pragma once

#include <string>
#include <vector>

#include "lab/job.h"
#include "model/acts.h"
#include "model/config.h"
#include "model/run_options.h"

namespace gpt2 {

// A receiver: a head and which of its inputs (HeadPart::kQuery, kKey or kValue).
struct PathReceiver {
  int layer = 0, head = 0;
  HeadPart part = HeadPart::kQuery;
};

// SPEC `logits` (an empty list: the final residual stream) or `L.H.q|k|v[,...]`. Throws
// gpt2::Error naming the part at fault, or the valid layers or heads.
std::vector<PathReceiver> ParsePathReceivers(const std::string& spec, const Config& c);
// Throws gpt2::Error unless sender and receivers are heads of the model and, for a single run,
// every receiver's block comes after the sender's (a receiver at or before it would see the
// clean run's inputs: nothing to patch).
void CheckPathReceivers(const std::vector<PathReceiver>& receivers, const Config& c);
void CheckPathSender(HeadRef sender, const std::vector<PathReceiver>& receivers, const Config& c);

struct PathPatchStart {
  int positions = 0, total = 0;  // tokens per prompt; senders (every head) in the sweep
  int target = 0, contrast = -1;
  double clean = 0, corrupt = 0;  // m of the clean and the corrupted run
};

struct PathPatchResult {
  double patched = 0, clean = 0, corrupt = 0;
  int target = 0, contrast = -1;
};

// Step 1 of both jobs: the plain model's clean and corrupted runs, checked first; iv: the page's
// interventions End gives the conversation back under.
class PathPatchJobBase : public CellJob {
 public:
  const PathPatchStart& start() const { return start_; }

 protected:
  PathPatchJobBase(Conversation& c, const std::vector<int>& clean,
                   const std::vector<int>& corrupted, const std::vector<PathReceiver>& receivers,
                   int target, int contrast, const LabInterventions& iv);
  double Metric(const float* logits) const;

  Session& session_;  // holds the clean run after step 1; the conversation's, unrecorded
  PathPatchStart start_;
  std::vector<PathReceiver> receivers_;  // empty: logits
  int T_ = 0;
  // Both runs' records: every head's output in each block (z) and the stream entering each block
  // (Acts::StreamInto; the clean run's is where step 2 and 3 re-run from).
  Acts clean_, corrupt_;
};

// The sweep: every head the sender in turn, layer by layer; cells (layer, head), value
// m_patched - m_clean. total: every head.
class PathPatchSweep : public PathPatchJobBase {
 public:
  PathPatchSweep(Conversation& c, const std::vector<int>& clean, const std::vector<int>& corrupted,
                 const std::vector<PathReceiver>& receivers, int target, int contrast,
                 const LabInterventions& iv);
  // m_patched of each sender (the clean run's m when no receiver comes after it).
  std::vector<double> Metrics(const std::vector<HeadRef>& senders);

 private:
  void Measure(size_t begin, size_t end) override;
  // Steps 2-3's final stream row of a sender (nullptr when no receiver comes after it).
  const float* PatchedRow(HeadRef sender);
};

// One sender's paths, each alone: to the logits and to every head of a later block (its q, k
// and v together). Cells: (n_layer, 0) for the logits first (measured at the start), then
// (layer, head) from the last block down, value m_patched - m_clean.
class SenderPathsJob : public PathPatchJobBase {
 public:
  SenderPathsJob(Conversation& c, const std::vector<int>& clean, const std::vector<int>& corrupted,
                 HeadRef sender, int target, int contrast, const LabInterventions& iv);

 private:
  void Measure(size_t begin, size_t end) override;
  // Step 2's q, k and v of every later block (empty up to the sender's).
  Acts inputs_;
};

// One sender's run of steps 1-3 under no interventions; the conversation is given back
// afterwards under the interventions set.
PathPatchResult PathPatch(Conversation& c, const std::vector<int>& clean,
                          const std::vector<int>& corrupted, HeadRef sender,
                          const std::vector<PathReceiver>& receivers, int target, int contrast);

}  // namespace gpt2
