// Direct logit attribution: which components' writes into the residual stream made a logit.
//
// The final stream at a position is a sum of writes: the embedding (token + position), each
// head's output through its slice of the output projection (TransformerLens blocks.L.attn.
// hook_result), each block's output-projection bias, each MLP's output (with its bias). With
// ln_f linearised, scale frozen at the full stream's value,
//   logit = sum_c  gamma . (c - mean(c)) / sqrt(var(x) + eps) . u   +   beta . u
// where u is the unembedding row of the target (minus the contrast's row). Each term is one
// component's attribution; beta . u is "ln_f_bias". The terms sum to the logit (difference)
// up to float rounding.
#pragma once

#include <string>
#include <vector>

#include "model/session.h"

namespace gpt2 {

struct AttributionRequest {
  int position = -1;  // index into the prompt; -1: the last
  int target = -1;    // token id; -1: the most probable next token at `position`
  int contrast = -1;  // token id whose logit is subtracted; -1: none
  // Ablations and skips keep the stream a sum of writes (an ablated head or skipped sublayer
  // writes nothing); no residual, post-norm and patches do not and are refused.
  const Interventions* interventions = nullptr;
  // Also receives every tensor of the run (e.g. the page's capture store); may be empty.
  ActivationObserver observer;
};

struct AttributionComponent {
  // "embed", "L.H", "attn_bias.L", "mlp.L", "stream_edits" (only under stream edits, e.g. SAE
  // steering: the final stream less every other write), "ln_f_bias"
  std::string name;
  double value;
};

struct Attribution {
  int position = 0, target = 0, contrast = -1;
  // In residual order: embed; per block L the heads L.0..L.(H-1), attn_bias.L, mlp.L;
  // stream_edits (under stream edits); ln_f_bias.
  std::vector<AttributionComponent> components;
  double logit = 0;  // the model's logit (difference) at `position`, from the forward pass
  const float* last_logits = nullptr;  // the session's, as Prefill returned them
};

// Runs the prompt in `session` from position 0 (the session is reset; afterwards it is as after
// Prefill(ids) with the request's interventions) and attributes the requested logit. Throws
// gpt2::Error for an out-of-range position or token, or interventions that break the residual sum.
Attribution AttributeLogit(Session& session, const std::vector<int>& ids,
                           const AttributionRequest& request);

}  // namespace gpt2
