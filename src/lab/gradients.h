// Gradient experiments on a model (model/backward.h): which prompt tokens a prediction leans on
// (saliency: gradient x input and integrated gradients, as Captum's InputXGradient and
// IntegratedGradients over the stream entering block 0), and every activation patch's
// first-order estimate at once (attribution patching, Nanda 2023; TransformerLens and nnsight).
//
// The metric is model/backward.h's m = logit[position, target] - logit[position, contrast].
// Both run on a Session the caller owns (reset by them: it holds the last run afterwards) and a
// Backward for the same model; `iv` (null: the plain model) applies to every run.
#pragma once

#include <string>
#include <vector>

#include "lab/conversation.h"
#include "model/backward.h"
#include "model/run_options.h"
#include "model/session.h"

namespace gpt2 {

enum class SaliencyMethod { kGradient, kIntegrated };
SaliencyMethod SaliencyMethodNamed(const std::string& name);  // "grad" or "ig"; throws for others

struct SaliencyRequest {
  int position = -1;  // < 0: the last
  int target = -1;    // < 0: the most probable next token at the position
  int contrast = -1;  // < 0: none
  SaliencyMethod method = SaliencyMethod::kGradient;
  int steps = 16;  // integrated gradients' K
};

// With x[p] = wte[id_p] + wpe[p] (the stream entering block 0):
//   kGradient:   value[p] = sum_d x[p, d] dm/dx[p, d];  delta = m(x)
//   kIntegrated: value[p] = sum_d x[p, d] (1/K) sum_k dm/dx[p, d] at alpha_k x (every position
//                scaled together), alpha_k = (k + 0.5) / K; baseline zero; delta = m(x) - m(0)
// total = sum_p value[p]. For kIntegrated, total -> delta as K grows (completeness).
struct SaliencyResult {
  int position = 0, target = 0, contrast = -1;
  std::vector<double> values;  // [T]
  double total = 0;
  double delta = 0;
  double metric = 0;  // m(x)
};

SaliencyResult Saliency(Session& session, Backward& backward, const std::vector<int>& ids,
                        const SaliencyRequest& request, const Interventions* iv);

// "Why this head attends here": gradient x input of one attention score (model/backward.h
// ScoreSpec: s = scale q[query] . k[key] of head spec.head in block spec.layer, before softmax),
// with x[p] = wte[id_p] + wpe[p] as saliency's kGradient: value[p] = sum_d x[p, d] ds/dx[p, d],
// zero for p > query (attention is causal); total = sum_p value[p].
struct ScoreSaliencyResult {
  ScoreSpec spec;
  std::vector<double> values;  // [T]
  double total = 0;
  double score = 0;  // s itself
};

ScoreSaliencyResult ScoreSaliency(Session& session, Backward& backward, const std::vector<int>& ids,
                                  const ScoreSpec& spec, const Interventions* iv);

// Attribution patching of a clean and a corrupted prompt of the same length, the metric at the
// last position (target < 0: the clean run's most probable next token), gradients at the clean
// run:
//   heads[L * H + h] = sum_p (z_corrupt[L, p, h] - z_clean[L, p, h]) . dm/dz[L, p, h]
//                      (z: blocks.L.attn.hook_z, the head's output before the projection)
//   resid_pre[L * T + p] = (x_corrupt[L, p] - x_clean[L, p]) . dm/dx[L, p]
//                      (x: blocks.L.hook_resid_pre)
// Throws gpt2::Error if the prompts' lengths differ.
struct AtpResult {
  int target = 0, contrast = -1, tokens = 0;
  std::vector<double> heads;      // [n_layer * n_head]
  std::vector<double> resid_pre;  // [n_layer * T]
  double metric_clean = 0, metric_corrupt = 0;
};

AtpResult AttributionPatching(Session& session, Backward& backward, const std::vector<int>& clean,
                              const std::vector<int>& corrupt, int target, int contrast,
                              const Interventions* iv);

// One cell of AttributionPatching, run exactly: the clean run (the differentiated one) with the
// corrupted run's value at that cell, value = m(patched) - m(clean) at the last position, which
// the cell's estimate approximates to first order. kHead: head `index` of block `layer`, its
// output before the projection (hook_z) at every position (HeadPatch kOutput); kResidPre: the
// stream entering block `layer` at position `index` (a ResidPatch, after iv's own patches).
// target < 0: the clean run's most probable next token. Throws gpt2::Error for prompts of
// different lengths or a cell out of range.
enum class AtpCell { kHead, kResidPre };
AtpCell AtpCellNamed(const std::string& name);  // "head" or "resid"; throws for others

struct ExactPatchResult {
  int target = 0, contrast = -1;
  double value = 0;  // metric_patched - metric_clean
  double metric_clean = 0, metric_patched = 0;
};

ExactPatchResult ExactPatch(Session& session, const std::vector<int>& clean,
                            const std::vector<int>& corrupt, AtpCell cell, int layer, int index,
                            int target, int contrast, const Interventions* iv);

// The four on a conversation (conversation.h), under its interventions: its tokens (saliency)
// or the prompts given, then the conversation given back (Conversation::WithRestore).
SaliencyResult Saliency(Conversation& c, const SaliencyRequest& request);
ScoreSaliencyResult ScoreSaliency(Conversation& c, const ScoreSpec& spec);
AtpResult AttributionPatching(Conversation& c, const std::vector<int>& clean,
                              const std::vector<int>& corrupt, int target, int contrast);
ExactPatchResult ExactPatch(Conversation& c, const std::vector<int>& clean,
                            const std::vector<int>& corrupt, AtpCell cell, int layer, int index,
                            int target, int contrast);

}  // namespace gpt2
