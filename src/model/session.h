// A Session runs a Model (model.h): the KV cache, prefill of many tokens, one-token decode
// steps, re-runs of a range from a block.
//
// Forward pass (pre-LN GPT-2, as Hugging Face GPT2LMHeadModel), in Session::Prefill's named
// steps (as gemma.cpp's TransformerLayer reads):
//   Embed:             h = wte[id] + wpe[pos]
//   for each block:
//     AttentionStep:   h += attn(ln_1(h))
//     MlpStep:         h += mlp(ln_2(h))
//   Unembed:           logits = ln_f(h) @ wte^T   (or `output` when the file has a separate head)
// Each step reports to RunOptions::observer and applies RunOptions::interventions
// (model/run_options.h) at its named points.
#pragma once

#include <cstdint>
#include <memory>

#include "model/model.h"
#include "model/run_options.h"

namespace gpt2 {

class ThreadPool;

// Positions [begin, end) of a Session, re-run from block first_block (Session::Rerun); with
// final_stream the call returns the residual stream leaving the last block instead of logits.
// end_block >= 0 stops after block end_block - 1 and returns the stream leaving it (as
// final_stream), for a probe that only needs what enters a later block (path patching's
// receivers); the blocks after it keep their cache.
struct RerunRange {
  int begin;
  int end;
  int first_block;
  bool final_stream = false;
  int end_block = -1;  // -1: every block to the last
};

// One conversation with the model. Owns the KV cache (model/kv_cache.h) and every scratch
// buffer, all allocated up front for the full context, so the token loop allocates nothing.
class Session {
 public:
  // activations: how every product with Q8_0/Q4_0 weights treats its input (kernels.h). kInt8
  // gives the same numbers on every target (the page and the native CLI agree token for token);
  // kFastest is faster natively (f32 prefill on AVX-512 without VNNI) but may differ slightly
  // from kInt8.
  explicit Session(const Model& model, int n_threads = 1,
                   QuantActivations activations = QuantActivations::kInt8);
  ~Session();

  // Runs ids at positions [position(), position() + n) and returns the logits of the last
  // one ([n_vocab], valid until the next call). Throws gpt2::Error if the tokens would pass the
  // context length, an id is out of range or an intervention does not fit the model; the
  // session is unchanged then. `run` holds this call's observer and interventions.
  const float* Prefill(const int* ids, int n, const RunOptions& run = RunOptions());
  const float* Step(int id, const RunOptions& run = RunOptions()) { return Prefill(&id, 1, run); }
  // Prefill's blocks [0, end_block) alone (1 <= end_block <= n_layer), for a reader of those
  // blocks' tensors (the dashboards of a dictionary's blocks): what it reports is what Prefill
  // reports of them; no logits, and blocks from end_block on hold no keys or values for these
  // positions, so Reset or Truncate the session before running on from them.
  void PrefillBlocks(const int* ids, int n, int end_block, const RunOptions& run);
  // Positions an unobserved Prefill runs at a time (a long prompt in pieces keeps the
  // activation buffers small; the result is the same).
  static constexpr int kPrefillChunk = 128;

  // Runs positions [range.begin, range.end) of the position() held again, from block
  // range.first_block, given the residual stream entering that block there (resid_in
  // [end - begin, C], e.g. "embed" or block first_block - 1's "resid_out" as observed in an
  // earlier run). Returns position end - 1's logits, or with range.final_stream its residual
  // stream leaving the last block ([n_embd], valid until the next call): then many probes' rows
  // can share one pass of FinalLogits (the unembedding reads its 50257 x 768 weights once for all
  // of them instead of once each, which for GPT-2 small is ~1/10 of a 32-token prefill per row).
  // The session still holds position() positions. Blocks before first_block keep their KV
  // cache, so an intervened re-run costs at most one prefill, and a probe at one position
  // re-runs only the rows it needs (which heads matter: [0, p]; a patch at p: [p, position())).
  // The interventions must change nothing before first_block (gpt2::Error otherwise, as for a
  // range outside the positions held); observed tensors of the skipped blocks and "embed" are
  // not reported again. Blocks first_block.. then hold this run's keys and values at
  // [begin, end) and the earlier run's elsewhere, so re-run the rows after `end` before relying
  // on them (every position from first_block or earlier before stepping on). Without an
  // observer only the last row's stream is computed to the end: the rows before it skip the
  // last block's MLP.
  const float* Rerun(const RerunRange& range, const float* resid_in, const RunOptions& run);
  // ln_f and the unembedding of n rows of the final residual stream: x [n, C] -> logits [n, V].
  void FinalLogits(const float* x, int n, float* logits);

  const Model& model() const { return model_; }
  int position() const { return position_; }
  // Threads actually running the kernels (fewer than asked where threads cannot be made).
  int n_threads() const;
  // Those threads, for other passes over the same model between this session's calls (the
  // backward pass, model/backward.h), so that a page's limited threads are not made twice.
  ThreadPool& pool();
  void Reset() { position_ = 0; }
  // Forget everything from position p on (keeps the cache before it).
  void Truncate(int p);

 private:
  struct Buffers;
  // Prefill through blocks [0, end_block): the last row's logits if end_block is n_layer.
  const float* PrefillTo(const int* ids, int n, int end_block, const RunOptions& run);
  // The named steps, each over T positions from pos0; x (the residual stream [T, C]) lives in
  // buffers_. They read and write the cache at those positions and leave position_ alone.
  void Embed(const int* ids, int pos0, int T, const RunOptions& run);
  void PatchResidual(int layer, int pos0, int T, const Interventions& iv);
  void AttentionStep(int layer, int pos0, int T, const RunOptions& run);
  void AttendHeads(int layer, int pos0, int T, const RunOptions& run);  // through the KV cache
  void ReportAttention(int layer, int pos0, int T, const RunOptions& run, bool attended,
                       bool inputs);
  void MlpStep(int layer, int pos0, int T, const RunOptions& run);
  // last: the row of x holding position pos0 + T - 1 (RunBlocks may have moved it to row 0).
  const float* Unembed(int pos0, int T, int64_t last, const RunOptions& run);
  // Blocks [first_block, end_block) over x; returns the last row's logits, or with unembed false
  // the stream leaving block end_block - 1.
  const float* RunBlocks(int first_block, int end_block, int pos0, int T, const RunOptions& run,
                         bool unembed);
  void StartBlockTimes(int first_block, const RunOptions& run);

  const Model& model_;
  int position_ = 0;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace gpt2
