// What the front ends keep of a forward pass, built on the activation observer (observer.h):
//   Recorder      every reported tensor, as reported (the CLI's `inspect --json`, tests);
//   CaptureStore  the page's per-position store, filled across prefill and steps, with the
//                 statistics its views draw (residual norms, LayerNorm input statistics, the
//                 final top probabilities, the logit lens, mean head outputs for mean ablation);
//   TopProbabilities  the one top-k-of-softmax helper they all use (LogProbability: one id's).
// The bindings only forward to these (src/bindings/embind.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/kv_cache.h"
#include "model/model.h"
#include "model/observer.h"
#include "model/run_options.h"

namespace gpt2 {

// The k most probable ids of softmax(logits) (most probable first, ties to the lower id) and
// their probabilities, into ids[k], probs[k]; when k > n the rest is -1 / 0. Softmax sums in
// double. One pass over the logits: cheap enough for every position's final distribution.
void TopProbabilities(const float* logits, int64_t n, int k, int* ids, float* probs);
// log softmax(logits)[id] (torch.log_softmax(logits, -1)[id]), summed in double.
double LogProbability(const float* logits, int64_t n, int id);

struct RecordedTensor {
  std::string name;
  int layer;
  int pos0;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

class Recorder {
 public:
  void Record(const Activation& a);
  ActivationObserver Observer() {
    return [this](const Activation& a) { Record(a); };
  }
  const std::vector<RecordedTensor>& tensors() const { return tensors_; }
  // The first tensor recorded under (name, layer), or nullptr.
  const RecordedTensor* Find(const std::string& name, int layer) const;

 private:
  std::vector<RecordedTensor> tensors_;
};

// Activations kept position by position across prefill and steps, for the page's views.
// Filled only contiguously from position 0 (a gap would make the views lie): a forward pass is
// captured only when it starts at n_positions(); see Begin/Commit/Abort.
class CaptureStore {
 public:
  static constexpr int kTopProbs = 10;  // tokens kept per position for the final distribution

  // The store reads the model (for the final distributions) until the next Init.
  void Init(const Model& model);
  void Clear();
  int n_positions() const { return n_positions_; }
  int n_layer() const { return n_layer_; }

  // Around one forward pass of n tokens starting at pos0 (== n_positions()): Begin makes room,
  // Observer() is the observer to pass, Commit keeps the positions, Abort drops them.
  void Begin(int pos0, int n);
  ActivationObserver Observer() {
    return [this](const Activation& a) { Observe(a); };
  }
  // Sets run's observer to this store and turns off what it does not keep (attention scores
  // and probabilities, every position's logits: a position's distribution is computed when first
  // asked for); the store takes a long prompt in chunks.
  void Watch(RunOptions& run) {
    run.observer = Observer();
    run.observe_scores = false;
    run.observe_probs = false;
    run.observe_all_logits = false;
    run.observe_whole_prompt = false;
  }
  void Commit();
  // Before Session::Rerun of every captured position from block first_block: the blocks
  // before it keep their captured values, the rest is observed again. Commit as usual;
  // after a failure Clear (part of the store may be rewritten).
  void BeginRerun(int first_block);
  void Abort();

  // [n_head, p + 1]: attention probabilities of query p in block `layer`, valid until the next
  // call: the run's own floats, recomputed from the queries and keys the store keeps by the
  // kernel the run used (AttentionHead), so the same bits.
  const float* Attention(int layer, int p) const;
  // [p + 1]: head `head`'s part of Attention(layer, p), at 1/n_head of its cost (the attention
  // view's map of one head asks for every query). Valid until the next call.
  const float* HeadAttention(int layer, int head, int p) const;
  const float* MlpActivations(int layer, int p) const;  // [n_ff]
  // [n_positions, C]: index 0 the embedding, index l + 1 after block l.
  const std::vector<float>& Residual(int index) const;
  // [kTopProbs]: the final distribution's most probable ids at p and their probabilities,
  // computed from the final residual stream on first use (one unembedding, ~10 ms for GPT-2
  // small in wasm, instead of one per position during the run).
  const int* TopIds(int p) const;
  const float* TopProbs(int p) const;

  // [n_layer + 1, P]: L2 norm of each residual stream row (row 0 the embedding).
  std::vector<float> ResidualNorms() const;
  // [n_layer, P, 4]: L2 norms of each block's sublayer tensors at each position, in the order
  // ln_1's output ("ln1"), attention's output after the projection ("attn_out"), ln_2's output
  // ("ln2"), the MLP's output ("mlp_out").
  std::vector<float> SublayerNorms() const;
  // [2 * n_layer + 1, P, 2]: mean and standard deviation (biased, as torch.nn.LayerNorm
  // normalises with; without eps) of each LayerNorm's input under the plain pre-LN model: rows
  // ln_1 of block 0, ln_2 of block 0, ln_1 of block 1, ..., ln_f. The inputs are the stream
  // before the block, after its attention, and after the last block.
  std::vector<float> LayerNormStats() const;
  // The logit lens after blocks [layer_begin, layer_end) for positions [begin, end): ids and
  // probs [layer_end - layer_begin, end - begin, top_k] (LogitLens in model.h). A block range
  // lets the page compute a window in pieces and answer clicks in between (for GPT-2 XL one
  // position is 48 unembeddings, ~1 s). Throws gpt2::Error for a window outside the store.
  void LogitLensWindow(const Model& model, int begin, int end, int layer_begin, int layer_end,
                       int top_k, std::vector<int>* ids, std::vector<float>* probs) const;
  // [n_layer, C]: each block's "attn_heads" averaged over the captured positions, the values
  // Interventions::head_means wants for mean ablation. Throws if nothing is captured.
  std::vector<float> HeadMeans() const;

  // Also keep block `layer`'s [T, C] tensor `name` (observer.h: "attn_out", "resid_attn",
  // "mlp_out", ...) for every position, from the next forward pass on (a reader of a hook the
  // store does not otherwise keep: an SAE at blocks.L.hook_mlp_out). Kept until Init.
  void KeepStream(const std::string& name, int layer);
  // [n_positions, C], or nullptr until every captured position of it has been observed (run the
  // conversation again from block `layer` to fill it).
  const std::vector<float>* Stream(const std::string& name, int layer) const;

 private:
  void Observe(const Activation& a);
  void Resize(int end);
  void CopyRows(std::vector<float>& dst, const Activation& a, int width);
  void CopyHeads(std::vector<float>& dst, const Activation& a);
  void CheckPosition(int layer, int p) const;
  // Heads [h0, h1) of query p's attention row into attn_row_ ([h1 - h0, p + 1]).
  const float* AttentionRows(int layer, int h0, int h1, int p) const;
  void EnsureTop(int p) const;

  const Model* model_ = nullptr;
  struct KeptStream {
    std::string name;
    int layer = 0;
    std::vector<float> rows;  // [filled, C]
    int filled = 0;           // positions 0..filled-1 observed
  };
  std::vector<KeptStream> kept_;

  int n_positions_ = 0;  // positions 0..n_positions_-1 are complete
  int pending_end_ = 0;
  int pending_T_ = 0;  // tokens of the forward pass being observed
  int n_layer_ = 0, n_head_ = 0, n_embd_ = 0, n_ff_ = 0, n_ctx_ = 0;
  // Queries and keys instead of the attention triangle they give: [P, C] per block grows
  // linearly (GPT-2 small at 1024 positions: 75 MB for both; the triangle was 151 MB even as
  // 16-bit fixed point), and a query's row costs n_head * (p + 1) dot products when asked for.
  std::vector<std::vector<float>> q_;  // [n_layer][P, C], heads concatenated
  // The keys as the session's KV cache holds them (same type, same format), so that they give
  // the run's probabilities to the bit; grown with the positions.
  KvCache keys_;
  mutable std::vector<float> attn_row_;    // Attention()'s answer [n_head, p + 1]
  std::vector<std::vector<float>> resid_;  // [n_layer + 1][P, C]: 0 embed, l+1 after block l
  // [n_layer][P, 2]: mean and standard deviation of the stream after attention of block l (ln_2's
  // input), the only use of that stream.
  std::vector<std::vector<float>> resid_attn_stats_;
  std::vector<std::vector<float>> mlp_act_;         // [n_layer][P, F] after GELU
  std::vector<std::vector<float>> sublayer_norms_;  // [n_layer][P, 4], see SublayerNorms
  std::vector<double> head_sum_;                    // [n_layer, C] "attn_heads" summed over P
  std::vector<double> pending_head_sum_;            // the same for the pass being observed
  // Filled on demand (EnsureTop); top_done_[p] says whether position p's entries are.
  mutable std::vector<int> top_ids_;      // [P, kTopProbs] from the final logits
  mutable std::vector<float> top_probs_;  // [P, kTopProbs]
  mutable std::vector<char> top_done_;    // [P]
};

}  // namespace gpt2
