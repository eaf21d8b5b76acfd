// `gpt2 inspect`: keeps a copy of every observed tensor and writes them, with the logit lens
// and the final probabilities, as one JSON document:
//   { "config": {...}, "ids": [..], "tokens": ["..."],
//     "tensors": [ {"name": "attn_probs", "layer": 0, "pos0": 0, "shape": [H, T, T],
//                   "data": [...]}, ... ],            // -inf is written as null
//     "logit_lens": [ {"layer": l, "position": p, "top_ids": [...], "top_probs": [...]}, ... ],
//     "final": [ {"position": p, "top_ids": [...], "top_probs": [...]}, ... ] }
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/observer.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

struct RecordedTensor {
  std::string name;
  int layer;
  int pos0;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

class InspectRecorder {
 public:
  void Record(const Activation& a);
  const std::vector<RecordedTensor>& tensors() const { return tensors_; }
  const RecordedTensor* Find(const std::string& name, int layer) const;

 private:
  std::vector<RecordedTensor> tensors_;
};

void WriteInspectJson(std::ostream& out, const Model& model, const Tokenizer& tokenizer,
                      const std::vector<int>& ids, const InspectRecorder& recorder, int top_k);

}  // namespace gpt2
