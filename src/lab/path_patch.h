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
// The Lab runs it (Lab::PathPatch, the sweep of every sender as a job: StartPathPatch,
// ContinueJob, EndJob; and one sender's paths to each later head alone: StartSenderPaths; lab.h),
// through the model's interventions (model/run_options.h):
// frozen attention from the sender's block on, the sender's output as a head patch, receivers'
// inputs as head patches. With every head frozen after the sender, positions no longer meet, so
// for `logits` step 2 runs the last position alone: a lone row through the blocks from the
// sender's (a sweep of GPT-2 small's 144 senders at 16 tokens is ~15 prefills' work).
#pragma once

#include <string>
#include <vector>

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

// What the sweep keeps of step 1 (the Lab's, between its calls).
struct PathPatchState {
  std::vector<PathReceiver> receivers;  // empty: logits
  int positions = 0, target = 0, contrast = -1;
  double clean = 0;
  // [n_layer + 1][T, C]: the clean stream entering block l (index n_layer: the final stream).
  std::vector<std::vector<float>> streams;
  // [n_layer][T, C]: every head's output in each block, clean and corrupted.
  std::vector<std::vector<float>> z_clean, z_corrupt;
  // A sender's paths (Lab::StartSenderPaths): its step 2's q, k and v of every later block,
  // [n_layer][3][H, T, D] (empty before the sender's block).
  std::vector<std::vector<std::vector<float>>> inputs;
};

}  // namespace gpt2
