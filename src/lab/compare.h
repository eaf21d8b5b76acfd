// The quantization lens: two models of the same shape and vocabulary (typically one file as F32
// and as Q8_0 or Q4_0) on the same tokens, block by block. For each block L, over the T positions:
//   cos = mean_p cos(x_A[p], x_B[p])           x = blocks.L.hook_resid_post of each model
//   rel = mean_p |x_A[p] - x_B[p]| / |x_A[p]|
//   kl  = mean_p KL(P_A || P_B)                 P = softmax of that block's logit lens (each
//   model's
//                                               own ln_f and unembedding, Session::FinalLogits)
// and top1 = the positions where the two next-token predictions (argmax of the final logits, ties
// to the lower id) agree. Sums in double.
//
// Cost: one prefill per model, observing only the residual stream after each block (and the
// attention probabilities when head drift is asked for), then the lens windows: every block's T
// rows through ln_f and the unembedding of each model, kLensRows rows at a time.
// `gpt2 compare` (src/tools/cli/compare_cmd.cc) prints it; the page's quantization lens draws it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "format/gguf.h"
#include "format/tensor_type.h"
#include "model/attribution.h"
#include "model/session.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

// Throws gpt2::Error naming the first field that differs (n_vocab, n_ctx, n_embd, n_head,
// n_layer, n_ff).
void CheckSameShape(const Config& a, const Config& b);
// Throws gpt2::Error unless both tokenizers have the same tokens (the same bytes for every id).
void CheckSameVocabulary(const Tokenizer& a, const Tokenizer& b);

struct BlockDrift {
  double cos = 0, rel = 0, kl = 0;
};

struct CompareOptions {
  // Also each head's pattern drift: the mean over queries of the total variation distance
  // (half the L1 distance) between the two models' attention rows. Keeps one model's attention
  // probabilities (n_layer * n_head * T * (T + 1) / 2 floats) while the other runs, so only
  // while they fit kHeadDriftBytes (GPT-2 small: up to ~480 tokens); longer, head_drift stays
  // empty.
  bool head_drift = false;
  // Also direct logit attribution (model/attribution.h) of both at the last position, for A's
  // most probable next token: each model's prefill is then AttributeLogit's.
  bool attribution = false;
};

struct Comparison {
  int positions = 0;
  std::vector<BlockDrift> blocks;            // [n_layer]
  int agree = 0;                             // positions whose top-1 next tokens agree
  std::vector<int> top_a, top_b;             // [positions] each model's top-1 next token
  std::vector<double> head_drift;            // [n_layer * n_head] when asked for, else empty
  Attribution attribution_a, attribution_b;  // when asked for (last_logits not kept)
};

constexpr size_t kHeadDriftBytes = size_t(64) << 20;

// Rows unembedded at a time in the lens windows: bounds the logits buffer (rows x n_vocab
// floats, 3.2 MB for GPT-2).
constexpr int kLensRows = 16;

// Runs ids in both sessions from position 0 (each is reset; afterwards it holds ids) and
// compares them. Throws gpt2::Error for models of different shapes or ids that do not fit.
Comparison CompareModels(Session& a, Session& b, const std::vector<int>& ids,
                         const CompareOptions& options = CompareOptions());

class Conversation;

// The second model of the lens, beside the lab's: it owns its file's bytes (freed with it), its
// Model and a one-thread Session (the pthreads build has threads for one pool: the lab's).
class SecondModel {
 public:
  // Takes the GGUF bytes; throws gpt2::Error for a file that is not a GPT-2 GGUF.
  explicit SecondModel(std::vector<uint8_t> bytes);
  // source re-encoded with matrix_type (convert/requantize.h, gpt2-convert's code).
  static std::unique_ptr<SecondModel> Requantized(const GgufFile& source, TensorType matrix_type);
  SecondModel(const SecondModel&) = delete;
  SecondModel& operator=(const SecondModel&) = delete;

  const Model& model() const { return *model_; }
  Session& session() { return *session_; }
  size_t file_bytes() const { return bytes_.size(); }
  const char* matrix_type() const;  // the blocks' weight type: "f32", "f16", "q8_0", "q4_0"

 private:
  std::vector<uint8_t> bytes_;
  std::shared_ptr<const GgufFile> file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Session> session_;
};

// The lens between the conversation's model (A) and b on ids, with head drift and attribution;
// then the conversation restarts as ids, captured under the plain model (a third prefill, so its
// attention can be opened). Throws gpt2::Error before running anything for ids that do not fit.
Comparison CompareOnConversation(Conversation& conversation, SecondModel& b,
                                 const std::vector<int>& ids);

}  // namespace gpt2
