// "Run again" (the page's experiment): the plain and the intervened model side by side at one
// position of a conversation, and what each writes from a prompt with the same sampling.
#pragma once

#include <vector>

#include "lab/conversation.h"
#include "model/sampler.h"

namespace gpt2 {

// How many of each distribution's most probable tokens "Run again" lists.
constexpr int kExperimentTop = 10;

struct ExperimentResult {
  int position = 0;
  int from_block = 0;         // the first block the re-run under the interventions ran
  std::vector<float> before;  // [n_vocab] plain next-token distribution
  std::vector<float> after;   // [n_vocab] intervened
  // KL(before || after) = sum_i before[i] * log(before[i] / max(after[i], 1e-30)) over the
  // vocabulary in double sums, clamped at >= 0: nats the intervention moved the prediction (a
  // token whose intervened probability underflowed counts as 1e-30, so the number is finite).
  double kl = 0;
  std::vector<int> top_before;  // [kExperimentTop] before's most probable ids (top_k.h order)
  std::vector<float> top_before_probs;        // their probabilities
  std::vector<int> top_after;                 // [kExperimentTop] after's most probable ids
  std::vector<float> top_after_probs;         // their probabilities
  std::vector<float> top_after_probs_before;  // before's probability of each top_after id
  std::vector<int> text_before;               // sampled ids
  std::vector<int> text_after;
};

// Throws for sampling settings out of range.
void CheckSampling(const SamplingParams& params);

// The plain model's and iv's distributions at `position` (clamped) of the conversation (iv's
// mean ablation: means over `prompt`), and what each writes from `prompt` (capture off, same
// sampling); leaves the conversation captured under iv, re-run from iv's first changed block.
ExperimentResult Experiment(Conversation& c, const std::vector<int>& prompt,
                            const LabInterventions& iv, int position,
                            const SamplingParams& sampling, int max_tokens);

}  // namespace gpt2
