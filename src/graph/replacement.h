// The attribution graph's replacement model (circuit-tracer's ReplacementModel,
// safety-research/circuit-tracer replacement_model.py: its setup_attribution, and the
// AttributionContext's compute_batch that runs the backward through it) over a per-block
// transcoder set (sae/transcoders.h), on ids that start with a BOS.
//
// The replacement model is the real forward with every attention pattern and every LayerNorm's
// 1/sigma (ln_1, ln_2, ln_f) frozen at the real run's values, and each block's MLP output
// replaced by recon + err, err = mlp_out - recon a constant and recon frozen. Its forward is the
// real one (STYLE.md 14: hooks on the plain forward), so ReplacementModel only runs the real
// model and keeps its record (model/acts.h); what remains is linear in the stream, and gradients
// cross attention only through its value/output path (OV) and LayerNorms only through their
// frozen linear maps (model/layer_norm.h FrozenLayerNormBackward).
//
// Every gradient is one batched backward through the frozen linear blocks (ReplacementBackward):
// many targets' rows [target x position, C] at once (matmuls over those rows), only the blocks
// below each batch's highest target and the positions up to its last one.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "model/acts.h"
#include "model/session.h"
#include "sae/transcoders.h"

namespace gpt2 {

class ThreadPool;

// An active transcoder feature of the real run (acts > 0), at a position after the BOS.
struct ActiveFeature {
  int layer, position, feature;
  float activation;
};

// The active features' writes at one block and position: acts W_dec[f] [n, C], and each one's
// column among the attribution's sources (its index in ReplacementModel::features()).
struct FeatureWrites {
  std::vector<float> rows;   // [n, C]
  std::vector<int> columns;  // [n]
};

// One row of the attribution: a target's layer (n_layer: a logit), its position, and the
// gradient of its quantity at the stream it reads (its block's resid_mid, or the final stream)
// through that stream's frozen LayerNorm, [C].
struct AttributionTarget {
  int layer;
  int position;
  std::vector<float> inject;
};

class ReplacementModel {
 public:
  // The real run: `session` is reset and run over ids (its cache then holds those ids' plain
  // run), keeping the record the replacement model reads (the embedding, each block's stream
  // entering it, its pattern, its stream after attention and its MLP output, the final stream)
  // and freezing each LayerNorm's 1/sigma from it. `transcoders` and the session's model and
  // thread pool (which the encoders run on) must outlive it.
  ReplacementModel(Session& session, const TranscoderSet& transcoders, const std::vector<int>& ids);

  // Block l's transcoder on the real stream (the build calls it once per block, going up):
  // appends the block's active features after the BOS to features(), by position then feature,
  // with their writes, and sets the block's error, mlp_out less the transcoder's output (its
  // decoder bias and every active feature's write, the BOS's too). A block without a transcoder:
  // no features, its whole MLP output is the error.
  void EncodeBlock(int layer);
  const std::vector<ActiveFeature>& features() const { return features_; }

  // The real run's logits at the last position [n_vocab].
  const std::vector<float>& last_logits() const { return last_logits_; }

  // The targets' gradients at the stream they read. A logit's quantity, ln_f(x) . (W_U[tok] -
  // mean_v W_U[v]) at the last position, through ln_f frozen there; one per token.
  std::vector<AttributionTarget> LogitTargets(const std::vector<int>& tokens) const;
  // A feature's pre-activation without b_enc, n(resid_mid[l, p]) . W_enc[:, f], through the
  // transcoder's bare LayerNorm frozen there.
  AttributionTarget FeatureTarget(const ActiveFeature& feature) const;

  // What the backward reads.
  const Model& model() const { return model_; }
  int tokens() const { return T_; }
  const std::vector<float>& embed() const { return run_.embed; }                     // [T, C]
  const std::vector<float>& pattern(int l) const { return run_.blocks[l].pattern; }  // [H, T, T]
  float ln1_inv(int l, int p) const { return ln1_inv_[l][p]; }
  const FeatureWrites& writes(int l, int p) const { return writes_[int64_t(l) * T_ + p]; }
  const float* error(int l, int p) const { return errors_[l].data() + int64_t(p) * run_.C; }

 private:
  const Model& model_;
  ThreadPool& pool_;
  const TranscoderSet& transcoders_;
  int T_;
  Acts run_;  // the real run's record
  // Each LayerNorm's 1/sigma per position: ln_1's and ln_2's per block [L][T], ln_f's [T].
  std::vector<std::vector<float>> ln1_inv_, ln2_inv_;
  std::vector<float> lnf_inv_;
  std::vector<float> last_logits_;
  std::vector<ActiveFeature> features_;
  std::vector<FeatureWrites> writes_;       // [L * T]
  std::vector<std::vector<float>> errors_;  // [L][T, C]
};

// Where each kind of source sits among the attribution's columns: the active features (in
// ReplacementModel::features() order), then the errors [n_layer, T], the embeddings [T] and the
// logits.
struct AttributionColumns {
  int64_t errors = 0;      // the first error's column: the number of active features
  int64_t embeddings = 0;  // the first embedding's
  int64_t size = 0;        // every column
};

// The backward through the replacement model for a batch of targets (circuit-tracer's
// compute_batch): every edge into each target, in one pass down the blocks. The gradient g [P, B,
// C] (row p * B + b: target b's gradient at position p) stands at the stream leaving the block
// passed; a block's steps, each a function in replacement.cc saying what it takes and leaves:
//   MlpOutputEdges     edges from the block's features and error (their writes . g); the MLP's
//                      output is constant, so g passes it unchanged
//   InjectTargets      the targets reading at this block (its resid_mid) add their gradient
//   LiveRows           the rows of g that can still carry gradient back
//   AttentionBackward  through the frozen patterns' value/output path (OV), those rows only
//   Ln1Backward        through ln_1 with 1/sigma frozen, added to g (the residual's identity)
// and after the last block EmbeddingEdges, at the stream entering block 0. Its heavy steps run on
// `pool`. `replacement` (with every block encoded) and `pool` must outlive it.
//
// Its products are model/matmul_on.h's MatMulTransposedOn over the model's own weights. Copies of
// W_proj^T and W_v^T in f32 for the forward's prompt kernels were tried: 11 % faster products in
// Chromium, but 57 MB more for GPT-2 small (over the graph's memory target) and 3x slower under
// Node (BENCHMARKS.md, "The graph at the machine's limit").
class ReplacementBackward {
 public:
  ReplacementBackward(const ReplacementModel& replacement, ThreadPool& pool,
                      AttributionColumns columns);

  // rows [targets.size(), columns.size]: every edge into each target (zero where none).
  void Run(const std::vector<const AttributionTarget*>& targets, float* rows);

 private:
  float* G(int p, int b) { return g_.data() + (int64_t(p) * B_ + b) * C_; }
  float* Row(int b) { return rows_ + int64_t(b) * columns_.size; }
  // Whether row (p, b) of g carries gradient across block l's MLP output: target b reads above
  // the block (its logit, or a later block's feature) at a position p or later.
  bool CrossesMlp(int l, int p, int b) const {
    const AttributionTarget& t = *(*targets_)[b];
    return t.layer > l && p <= t.position;
  }
  void MlpOutputEdges(int layer);
  void InjectTargets(int layer);
  int64_t LiveRows(int layer);
  void AttentionBackward(int layer);
  void Ln1Backward(int layer);
  void EmbeddingEdges();

  const ReplacementModel& replacement_;
  ThreadPool& pool_;
  AttributionColumns columns_;
  int C_, T_;
  // The batch Run is on: its targets (B of them), positions [0, P), its rows.
  const std::vector<const AttributionTarget*>* targets_ = nullptr;
  int B_ = 0, P_ = 0;
  float* rows_ = nullptr;
  // Scratch, reused between batches.
  std::vector<float> g_;             // [P * B, C]
  std::vector<float> gc_, gz_, gv_;  // the live rows' [n_live, C]
  std::vector<float> out_;           // MlpOutputEdges' products, position p's [B, n] at out_at_[p]
  std::vector<int64_t> out_at_;      // [P]
  std::vector<int64_t> live_;        // the live rows' p * B + b
  std::vector<int> slot_;            // [P * B]: row -> its place among the live, or -1
};

}  // namespace gpt2
