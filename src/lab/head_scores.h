// Head detection: what kind of head each attention head is, scored from its attention pattern on
// a repeated sequence (TransformerLens's detect_head: "previous_token_head",
// "duplicate_token_head", "induction_head").
//
// The sequence is [<|endoftext|>, I1..IR, I1..IR] (positions 0..2R). With A = a head's attention
// probabilities (blocks.L.attn.hook_pattern, A[query, key]):
//   prev      = mean over p in 1..2R   of A[p, p - 1]      (the token just before)
//   dup       = mean over p in R+1..2R of A[p, p - R]      (the same token, first copy)
//   induction = mean over p in R+1..2R of A[p, p - R + 1]  (the token after the earlier copy of
//                                                           the current one: what comes next)
// Attention spread evenly over the visible keys gives A[p, k] = 1 / (p + 1): prev then scores
// (H(2R + 1) - 1) / 2R with H the harmonic number, dup and induction about ln(2) / R (0.042 and
// 0.014 for R = 50). UniformHeadScores says exactly; a head worth a name scores far above.
//
// `gpt2 heads` (src/tools/cli/heads_cmd.cc) and the page's heads grid (web/views/view-heads.js)
// both call DetectHeads; scripts/make_golden.py computes the same scores with PyTorch.
#pragma once

#include <cstdint>
#include <vector>

#include "model/capture.h"

namespace gpt2 {

class Conversation;

// Without --ids: R = kDefaultHeadIds ids drawn by SplitMix64 (model/sampler.h's Rng) seeded with
// kHeadIdsSeed: id = Next() % (n_vocab - 1) (so never the last id, GPT-2's <|endoftext|> 50256),
// a draw equal to an earlier id is skipped, so the R ids are distinct (a repeat inside one copy
// would blur the duplicate and induction scores). scripts/make_golden.py draws the same ids.
constexpr int kDefaultHeadIds = 50;
constexpr uint64_t kHeadIdsSeed = 2028;
// Throws gpt2::Error when n_vocab - 1 < n (not enough distinct ids).
std::vector<int> DefaultHeadIds(int n_vocab, int n = kDefaultHeadIds);

// [<|endoftext|>, ids..., ids...].
std::vector<int> RepeatedSequence(const std::vector<int>& ids);

// The three scores of every head, [n_layer * n_head] each, head h of block l at l * n_head + h.
struct HeadScores {
  int n_layer = 0, n_head = 0;
  int repeat = 0;  // R
  std::vector<double> prev, dup, induction;
};

// The scores from a capture holding RepeatedSequence of `repeat` ids at positions 0..2R
// (capture.n_positions() must be 2R + 1) of a model with n_head heads per block, from the
// attention probabilities the run used (CaptureStore::Attention, the same bits). Summed in
// double. Throws gpt2::Error for a capture of another length.
HeadScores ScoreHeads(const CaptureStore& capture, int n_head, int repeat);

// What attention spread evenly over the visible keys scores for `repeat` ids: {prev, dup,
// induction} (the baseline the page's kinds are measured against).
struct UniformScores {
  double prev = 0, dup = 0, induction = 0;
};
UniformScores UniformHeadScores(int repeat);

// One captured prefill of RepeatedSequence(ids) under the conversation's interventions, scored:
// the conversation restarts as that sequence (so its attention can be looked at after),
// captured whatever the capture setting; ids are checked first (at least one, each in the
// vocabulary, 2R + 1 within the context): nothing runs when they fail.
HeadScores DetectHeads(Conversation& conversation, const std::vector<int>& ids);

}  // namespace gpt2
