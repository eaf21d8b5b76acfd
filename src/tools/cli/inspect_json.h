// `gpt2 inspect`: keeps a copy of every observed tensor and writes them, with the logit lens
// and the final probabilities, as one JSON document:
//   { "config": {...}, "ids": [..], "tokens": ["..."],
//     "tensors": [ {"name": "attn_probs", "layer": 0, "pos0": 0, "shape": [H, T, T],
//                   "data": [...]}, ... ],            // -inf is written as null
//     "logit_lens": [ {"layer": l, "position": p, "top_ids": [...], "top_probs": [...]}, ... ],
//     "final": [ {"position": p, "top_ids": [...], "top_probs": [...]}, ... ] }
// With interventions the tensors are the intervened run's, and the document says which:
//   "interventions": {"ablate_heads": [[l, h], ...], "skip_attn": [l, ...], "skip_mlp": [...],
//                     "no_residual": [...], "post_norm": false} `gpt2 attribute --json` writes
//   { "position": p, "target": id, "contrast": id or -1,
//     "components": [ {"name": "embed", "value": v}, ... ], "logit": v }
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "model/attribution.h"
#include "model/capture.h"
#include "model/model.h"
#include "model/observer.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

void WriteInspectJson(std::ostream& out, const Model& model, const Tokenizer& tokenizer,
                      const std::vector<int>& ids, const Recorder& recorder, int top_k,
                      const Interventions& interventions);
void WriteAttributionJson(std::ostream& out, const Attribution& attribution);

}  // namespace gpt2
