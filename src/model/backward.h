// The backward pass: gradients of one scalar metric of the logits with respect to the
// activations (never the weights), through every step of the forward pass and its
// interventions (model/run_options.h), as llm.c's gpt2_backward runs its layers' backwards in
// reverse, checked against PyTorch autograd (scripts/make_golden.py, tests/model/backward_test.cc).
//
// The metric: m = logit[position, target] - logit[position, contrast] (contrast < 0: the target's
// logit alone).
//
// Backward::Forward runs a Session over a whole prompt from position 0 (or, for integrated
// gradients, the blocks over a given stream entering block 0) and keeps what the backward
// reads, per token and block: the stream entering the block (C), q, k and v (3C), the stream
// after attention (C), the MLP's input to GELU (F = 4C for GPT-2), and the attention
// probabilities (H x T); under post-norm also the two sublayer outputs (2C). For GPT-2 small at
// 128 tokens that is 12 x 128 x (9 x 768 + 12 x 128) x 4 bytes = 50 MB (SavedBytes()).
//
// Backward::Run then reports the gradients, dm/d(tensor), to an ActivationObserver under the
// observer's hooks (hooks.h, TransformerLens hooks in brackets), every one [T, ...] over the
// whole prompt (rows after the metric's position are zero: attention is causal):
//   per block l, in the order computed (last block first):
//     "resid_out" [T, C]   (blocks.l.hook_resid_post)
//     "mlp_out" [T, C], "mlp_act" [T, F], "mlp_pre" [T, F], "ln2" [T, C]
//     "resid_attn" [T, C]  (blocks.l.hook_resid_mid)
//     "attn_out" [T, C]
//     "attn_heads" [T, C]  (blocks.l.attn.hook_z, flattened); an ablated head (zero or mean)
//                          has its gradient here, but none flows through it to q, k, v
//     "attn_scores" [H, T, T] (the scaled scores before softmax; masked entries 0)
//     "q", "k", "v" [H, T, D], "ln1" [T, C]
//     "resid_pre" [T, C]   (blocks.l.hook_resid_pre: the stream entering the block, after any
//                          patch there; a patched position passes no gradient further back)
//   (edits at a point report the gradient of the edited tensor, then pass through their own
//   backward: the forward's observer also reports the edited tensors)
//   then (layer -1) "embed" [T, C] (hook_embed + hook_pos_embed: the stream entering block 0
//   before patches of block 0), and first of all "ln_f" [T, C] (ln_final.hook_normalized).
// A skipped sublayer reports zero gradients for its insides.
//
// Every intervention of run_options.h is differentiated exactly, none treated as the identity:
// ablated, patched (HeadPatch) and frozen heads' outputs and patched head inputs and streams are
// constants, so no gradient passes them (their own gradient is still reported); a frozen block
// reports zeros for its scores, q, k, v and ln1. A stream edit goes back through its own
// vector-Jacobian product (StreamEdit::backward: the SAE's steering and clamping, sae.h), taken at
// the rows it received in the forward; Forward refuses an edit without one, naming it.
//
// The metric may instead be one attention score of a block (ScoreSpec): s = scale q[query] .
// k[key] of a head, the scaled score before softmax (blocks.L.attn.hook_attn_scores). Its
// backward is the same pass started inside block L: block L reports from "attn_scores" (1 at
// the score, 0 elsewhere) down; the blocks after L and block L's steps after its scores are not
// reported (nothing there reaches the score).
//
// Products with Q8_0/Q4_0 weights multiply by the dequantized weights' transpose (kernels.h
// MatMulTransposed), the straight-through gradient of the int8 activation rounding; attention
// uses the f32 q, k, v before the KV cache's rounding and the forward's probabilities.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/acts.h"
#include "model/observer.h"
#include "model/run_options.h"
#include "model/session.h"

namespace gpt2 {

class ThreadPool;

struct MetricSpec {
  int position = 0;
  int target = 0;
  int contrast = -1;  // < 0: none
};

struct ScoreSpec {
  int layer = 0;
  int head = 0;
  int query = 0;  // the attending position
  int key = 0;    // <= query
};

class Backward {
 public:
  explicit Backward(const Model& model, int n_threads = 1);
  // Runs on `pool` (e.g. Session::pool() of the session it differentiates), which must outlive it.
  Backward(const Model& model, ThreadPool& pool);
  ~Backward();
  Backward(const Backward&) = delete;
  Backward& operator=(const Backward&) = delete;

  // Runs `session` (reset first) over ids [0, T) under `iv` (null: the plain model; an edit
  // without a backward is refused with gpt2::Error naming it), keeping in acts() what Run needs
  // and the hooks in `also`. With resid_in
  // ([T, C]) the blocks run over that stream entering block 0 instead of the embedding (the
  // session runs the ids once plainly first unless it holds them already, as left by the last
  // Forward of the same ids).
  void Forward(Session& session, const std::vector<int>& ids, const Interventions* iv,
               const float* resid_in = nullptr, HookSet also = {});

  int tokens() const { return T_; }
  // The last Forward's record (acts.h): what Run reads and the hooks asked for.
  const Acts& acts() const { return acts_; }
  // The stream entering block 0 of the last Forward, [T, C] (the embedding, or resid_in).
  const std::vector<float>& embed() const { return acts_.embed; }
  // The metric of the last Forward's logits at spec.position (through session.FinalLogits:
  // the forward's own numbers), and the logits there ([n_vocab]).
  double Metric(Session& session, const MetricSpec& spec);
  void Logits(Session& session, int position, std::vector<float>& logits);

  // The gradients of the metric at every named point, to `grads` (see the header comment).
  // Throws gpt2::Error for a position or token out of range.
  void Run(const MetricSpec& spec, const ActivationObserver& grads);

  // The same for one attention score of the last Forward (see the header comment), and that
  // score from the kept f32 q and k. Throw gpt2::Error for a layer, head or position out of
  // range, a key after the query, or a block whose attention is skipped.
  void RunScore(const ScoreSpec& spec, const ActivationObserver& grads);
  double Score(const ScoreSpec& spec) const;

  // Bytes of what the last Forward kept: C + 3C + C + F floats per token and block (post-norm:
  // 2C more), H x T probabilities per token and block, and the embedding and final stream.
  int64_t SavedBytes() const;

 private:
  static void CheckDifferentiable(const Interventions& iv);
  void LayerNormBackwardRows(const float* x, const float* gamma, const float* dy, float* dx,
                             int64_t rows, bool accumulate) const;
  void Transposed(const float* dy, int64_t rows, const WeightView& w, float* dx);
  void Prepare();
  void CheckScore(const ScoreSpec& spec) const;
  // The blocks' backward, each a forward step's (session.cc) in reverse; backward.cc says what
  // each takes and leaves in g_.
  void Blocks(int top, int64_t lo, const ScoreSpec* score, const ActivationObserver& grads);
  void PostNormBackward(const std::vector<float>& x, const std::vector<float>& out, bool nores,
                        const float* gamma, int64_t lo, int64_t rows);
  void MlpStepBackward(int l, int64_t lo, int64_t rows, const ActivationObserver& grads);
  bool AttentionStepBackward(int l, int64_t lo, int64_t rows, const ActivationObserver& grads);
  void AttentionBackward(int layer, int64_t first, int64_t rows, const float* dz,
                         const ActivationObserver& grads);
  void ScoreBackward(const ScoreSpec& score, int64_t rows, const ActivationObserver& grads);
  void ReportHeadInputs(int l, const ActivationObserver& grads);
  void QkvRows(int l, int64_t rows);
  void Ln1Backward(int l, int64_t rows, bool attended, const ActivationObserver& grads);
  void ResidPreBackward(int l, int64_t rows, const ActivationObserver& grads);
  void EditsBackward(int l, StreamPoint point, int64_t lo, int64_t rows, float* g) const;

  const Model& model_;
  std::unique_ptr<ThreadPool> own_pool_;  // unless given one
  ThreadPool* pool_;
  Interventions iv_;
  int T_ = 0;
  std::vector<int> ids_;
  Acts acts_;                                // the last Forward's record
  std::vector<std::vector<float>> edit_in_;  // [stream edit][T, C]: the rows as they entered it
  // Scratch of Run, reused.
  std::vector<float> g_, dx_, dsub_, dff_, dz_, dqkv_, dq_, dk_, dv_, dscores_, tmp_, report_;
  std::vector<float> zeros_;  // [max(H T T, T F)] zeros for skipped sublayers, only grown
};

}  // namespace gpt2
