// The GPT-2 forward pass over a KV cache. Mirrors Hugging Face GPT2Model.forward (pre-LN
// blocks) with llm.c's habit of one flat buffer per activation, allocated once per Session.
#include "model/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/aligned.h"
#include "base/error.h"
#include "format/quant.h"
#include "model/kv_cache.h"
#include "model/matmul_on.h"
#include "model/thread_pool.h"

namespace gpt2 {

namespace {

// Activation rows on a cache line (base/aligned.h), zeroed as a plain std::vector's.
using Activations = CacheLineVector<float>;

}  // namespace

struct Session::Buffers {
  Buffers(const Config& c, int n_threads, QuantActivations act)
      : config(c),
        activations(act),
        pool(n_threads),
        kv(c, c.n_ctx),
        scores(size_t(c.n_head) * c.n_ctx),
        probs(size_t(c.n_head) * c.n_ctx),
        logits(size_t(c.n_vocab)) {}

  // The per-position activations grow to the most positions one call has run (a plain prefill
  // runs at most kPrefillChunk at a time), instead of n_ctx up front: a loaded model then holds
  // the file and the KV cache, not ~35 MB of GPT-2 small's activations it may never use.
  void EnsureRows(int64_t rows) {
    if (rows <= rows_) return;
    const size_t T = size_t(rows), C = size_t(config.n_embd);
    for (Activations* v : {&x, &xn, &heads, &tmp}) v->resize(T * C);
    qkv.resize(T * 3 * C);
    ff.resize(T * size_t(config.n_ff));
    rows_ = rows;
  }

  const Config config;
  const QuantActivations activations;  // for every MatMul of Q8_0/Q4_0 weights
  int64_t rows_ = 0;
  ThreadPool pool;
  MatMulInput matmul_input;   // the activations of the matmul running now (MatMulOn)
  Activations x;              // [T, C] residual stream
  Activations xn;             // [T, C] LayerNorm output
  Activations qkv;            // [T, 3C] q | k | v, heads contiguous inside each
  Activations heads;          // [T, C] attention output, heads concatenated
  Activations tmp;            // [T, C] projection outputs before the residual add
  Activations ff;             // [T, F] MLP hidden
  KvCache kv;                 // every block's keys and values, [L, H, n_ctx, D] in its format
  std::vector<float> scores;  // [H, n_ctx] per-head scratch
  std::vector<float> probs;   // [H, n_ctx]
  std::vector<float> logits;  // [V] logits of the last position
  // Only used while an observer is set (allocated on first use, then reused).
  std::vector<float> observed;    // [H, T, D] q/k/v regrouped, or [T, V] logits
  std::vector<float> obs_scores;  // [H, T, n_keys]
  std::vector<float> obs_probs;   // [H, T, n_keys]
};

Session::Session(const Model& model, int n_threads, QuantActivations activations)
    : model_(model), buffers_(new Buffers(model.config(), n_threads, activations)) {}

int Session::n_threads() const { return buffers_->pool.size(); }

ThreadPool& Session::pool() { return buffers_->pool; }

Session::~Session() = default;

void Session::Truncate(int p) {
  if (p < 0 || p > position_)
    throw Error("cannot truncate the session to position " + std::to_string(p));
  position_ = p;
}

namespace {

// A sublayer's input xn [T, C]: its LayerNorm of the stream x (pre-LN), or x itself under
// post-norm, where the LayerNorm comes after the residual write instead (WriteSublayer).
void ReadSublayer(bool post_norm, const float* x, const float* ln_g, const float* ln_b, float* xn,
                  int64_t T, int64_t C, float eps) {
  if (post_norm) {
    std::copy_n(x, T * C, xn);
    return;
  }
  for (int64_t t = 0; t < T; ++t) LayerNorm(x + t * C, ln_g, ln_b, eps, C, xn + t * C);
}

// The rows of patch values [pos0, pos0 + rows) that fall in a call's rows [call0, call0 + T):
// the call's first row t0 and how many, n (0: none).
struct RowOverlap {
  int64_t t0 = 0, from = 0, n = 0;  // call row t0 takes values row `from`
};
RowOverlap Overlap(int64_t pos0, int64_t rows, int64_t call0, int64_t T) {
  RowOverlap o;
  const int64_t begin = std::max(pos0, call0), end = std::min(pos0 + rows, call0 + T);
  if (begin >= end) return o;
  o.t0 = begin - call0;
  o.from = begin - pos0;
  o.n = end - begin;
  return o;
}

// Head patches of part `part` in block l: rows of their values [rows, D] over the head's slice of
// dst, whose row t is at dst + t * stride (the call's rows start at absolute position pos0).
void PatchHeads(const Interventions& iv, int l, HeadPart part, const Config& c, int64_t pos0,
                int64_t T, float* dst, int64_t stride) {
  const int64_t D = c.head_dim();
  for (const HeadPatch& p : iv.head_patches) {
    if (p.layer != l || p.part != part) continue;
    const RowOverlap o = Overlap(p.pos0, int64_t(p.values.size()) / D, pos0, T);
    for (int64_t i = 0; i < o.n; ++i) {
      std::copy_n(p.values.data() + (o.from + i) * D, D, dst + (o.t0 + i) * stride + p.head * D);
    }
  }
}

// Head inputs patched in qkv [T, 3C] (q | k | v per row), before AttendHeads stores the keys and
// values: TransformerLens blocks.l.attn.hook_q/k/v[:, :, h] = values.
void PatchHeadInputs(const Interventions& iv, int l, const Config& c, int64_t pos0, int64_t T,
                     float* qkv) {
  const int64_t C = c.n_embd;
  PatchHeads(iv, l, HeadPart::kQuery, c, pos0, T, qkv, 3 * C);
  PatchHeads(iv, l, HeadPart::kKey, c, pos0, T, qkv + C, 3 * C);
  PatchHeads(iv, l, HeadPart::kValue, c, pos0, T, qkv + 2 * C, 3 * C);
}

// Head outputs in block l's heads output [T, C], before the output projection: patched values
// (TransformerLens blocks.l.attn.hook_z[:, h] = values), then ablation (= 0 or its mean), which
// is the constant case and wins where both name a head.
void ReplaceHeadOutputs(const Interventions& iv, int l, const Config& c, int64_t pos0, int64_t T,
                        float* heads) {
  const int64_t C = c.n_embd, D = c.head_dim();
  PatchHeads(iv, l, HeadPart::kOutput, c, pos0, T, heads, C);
  for (const HeadRef& a : iv.ablate_heads) {
    if (a.layer != l) continue;
    for (int64_t t = 0; t < T; ++t) {
      float* z = heads + t * C + a.head * D;
      if (iv.head_means.empty())
        std::fill_n(z, D, 0.0f);
      else
        std::copy_n(iv.head_means.data() + size_t(l) * C + a.head * D, D, z);
    }
  }
}

// The residual write of a sublayer's output `out` [T, C] into the stream x [T, C]: x += out
// for the plain model; under interventions the write is skipped (skip list), replaces the stream
// (no residual), and under post-norm is followed by the sublayer's LayerNorm (ln_g, ln_b).
// Both sublayers end this way; only the skip list and the LayerNorm differ.
void WriteSublayer(const Interventions* iv, int layer, bool skip, const float* out,
                   const float* ln_g, const float* ln_b, float* x, int64_t T, int64_t C,
                   float eps) {
  if (iv == nullptr) {
    AddInPlace(x, out, T * C);
    return;
  }
  if (skip) return;
  if (Interventions::Lists(iv->no_residual, layer))
    std::copy_n(out, T * C, x);
  else
    AddInPlace(x, out, T * C);
  if (iv->post_norm) {
    for (int64_t t = 0; t < T; ++t) LayerNorm(x + t * C, ln_g, ln_b, eps, C, x + t * C);
  }
}

}  // namespace

void Interventions::Validate(const Config& c) const {
  const std::string layers = "valid layers are 0.." + std::to_string(c.n_layer - 1);
  auto check_layer = [&](int l, const char* what) {
    if (l < 0 || l >= c.n_layer) {
      throw Error(std::string(what) + ": layer " + std::to_string(l) + " is out of range; " +
                  layers);
    }
  };
  for (const HeadRef& h : ablate_heads) {
    check_layer(h.layer, "ablate heads");
    if (h.head < 0 || h.head >= c.n_head) {
      throw Error("ablate heads: head " + std::to_string(h.head) +
                  " is out of range; valid heads are 0.." + std::to_string(c.n_head - 1));
    }
  }
  if (!head_means.empty() && head_means.size() != size_t(c.n_layer) * c.n_embd) {
    throw Error("mean ablation needs " + std::to_string(c.n_layer) + " x " +
                std::to_string(c.n_embd) + " head means, got " + std::to_string(head_means.size()));
  }
  for (int l : skip_attn) check_layer(l, "skip attention");
  for (int l : skip_mlp) check_layer(l, "skip MLP");
  for (int l : no_residual) check_layer(l, "no residual");
  const int64_t D = c.head_dim();
  auto check_rows = [&](const char* what, int pos0, size_t values, int64_t width) {
    if (values == 0 || values % size_t(width) != 0) {
      throw Error(std::string(what) + ": " + std::to_string(values) +
                  " values are not whole rows of " + std::to_string(width));
    }
    const int64_t rows = int64_t(values / size_t(width));
    if (pos0 < 0 || pos0 + rows > c.n_ctx) {
      throw Error(std::string(what) + ": positions " + std::to_string(pos0) + ".." +
                  std::to_string(pos0 + rows - 1) + " are out of range; valid positions are 0.." +
                  std::to_string(c.n_ctx - 1));
    }
  };
  for (const HeadPatch& p : head_patches) {
    check_layer(p.layer, "head patch");
    if (p.head < 0 || p.head >= c.n_head) {
      throw Error("head patch: head " + std::to_string(p.head) +
                  " is out of range; valid heads are 0.." + std::to_string(c.n_head - 1));
    }
    check_rows("head patch", p.pos0, p.values.size(), D);
  }
  for (size_t i = 0; i < frozen_attn.size(); ++i) {
    const FrozenAttention& f = frozen_attn[i];
    check_layer(f.layer, "frozen attention");
    check_rows("frozen attention", f.pos0, f.heads.size(), c.n_embd);
    for (size_t j = 0; j < i; ++j) {
      if (frozen_attn[j].layer == f.layer) {
        throw Error("frozen attention: block " + std::to_string(f.layer) + " is frozen twice");
      }
    }
  }
  for (const StreamEdit& e : stream_edits) {
    check_layer(e.layer, "stream edit");
    if (!e.edit) throw Error("stream edit: no function");
  }
  for (const ResidPatch& p : patches) {
    check_layer(p.layer, "patch");
    if (p.position < 0 || p.position >= c.n_ctx) {
      throw Error("patch: position " + std::to_string(p.position) +
                  " is out of range; valid positions are 0.." + std::to_string(c.n_ctx - 1));
    }
    if (p.value.size() != size_t(c.n_embd)) {
      throw Error("patch: the residual vector has " + std::to_string(p.value.size()) +
                  " values, the model " + std::to_string(c.n_embd));
    }
  }
}

int Interventions::FirstChangedBlock(int n_layer) const {
  if (post_norm) return 0;
  int first = n_layer;
  for (const HeadRef& h : ablate_heads) first = std::min(first, h.layer);
  for (int l : skip_attn) first = std::min(first, l);
  for (int l : skip_mlp) first = std::min(first, l);
  for (int l : no_residual) first = std::min(first, l);
  for (const ResidPatch& p : patches) first = std::min(first, p.layer);
  for (const HeadPatch& p : head_patches) first = std::min(first, p.layer);
  for (const FrozenAttention& f : frozen_attn) first = std::min(first, f.layer);
  // An edit at block L's stream changes block L's output (resid_pre: its input) onward.
  for (const StreamEdit& e : stream_edits) first = std::min(first, e.layer);
  return first;
}

void Interventions::CheckRows(const Config& c, int begin, int end, int first_block) const {
  for (const FrozenAttention& f : frozen_attn) {
    const int rows = static_cast<int>(f.heads.size() / size_t(c.n_embd));
    if (f.layer >= first_block && (begin < f.pos0 || end > f.pos0 + rows)) {
      throw Error("frozen attention of block " + std::to_string(f.layer) + " has positions " +
                  std::to_string(f.pos0) + ".." + std::to_string(f.pos0 + rows - 1) +
                  ", the run needs " + std::to_string(begin) + ".." + std::to_string(end - 1));
    }
  }
}

const float* Session::Prefill(const int* ids, int n, const RunOptions& run) {
  return PrefillTo(ids, n, model_.config().n_layer, run);
}

void Session::PrefillBlocks(const int* ids, int n, int end_block, const RunOptions& run) {
  const int L = model_.config().n_layer;
  if (end_block < 1 || end_block > L) {
    throw Error("cannot run blocks 0.." + std::to_string(end_block - 1) + ": the model has 0.." +
                std::to_string(L - 1));
  }
  PrefillTo(ids, n, end_block, run);
}

const float* Session::PrefillTo(const int* ids, int n, int end_block, const RunOptions& run) {
  const Config& c = model_.config();
  if (n <= 0) throw Error("nothing to run: the prompt has no tokens");
  if (position_ + n > c.n_ctx) {
    throw Error("the text is too long for the model: " + std::to_string(position_ + n) +
                " tokens, but its context holds " + std::to_string(c.n_ctx));
  }
  for (int i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= c.n_vocab) {
      throw Error("token id " + std::to_string(ids[i]) + " is outside the vocabulary (0.." +
                  std::to_string(c.n_vocab - 1) + ")");
    }
  }
  if (run.interventions != nullptr) {
    run.interventions->Validate(c);
    run.interventions->CheckRows(c, position_, position_ + n, 0);
  }
  // A chunk is a multiple of the kernels' 4-token tiles, so every position meets the same
  // arithmetic as in one pass and the blocks' results are the same bits.
  const int chunk = run.observer && run.observe_whole_prompt ? n : kPrefillChunk;
  const float* logits = nullptr;
  StartBlockTimes(0, run);
  for (int i = 0; i < n; i += chunk) {
    const int m = std::min(chunk, n - i);
    buffers_->EnsureRows(m);
    Embed(ids + i, position_, m, run);
    logits = RunBlocks(0, end_block, position_, m, run, /*unembed=*/end_block == c.n_layer);
    position_ += m;
  }
  return logits;
}

const float* Session::Rerun(const RerunRange& range, const float* resid_in, const RunOptions& run) {
  const Config& c = model_.config();
  if (range.begin < 0 || range.begin >= range.end || range.end > position_) {
    throw Error("cannot re-run positions " + std::to_string(range.begin) + ".." +
                std::to_string(range.end - 1) + ": the session holds " +
                (position_ > 0 ? "0.." + std::to_string(position_ - 1) : std::string("none")));
  }
  if (range.first_block < 0 || range.first_block > c.n_layer) {
    throw Error("re-run: block " + std::to_string(range.first_block) +
                " is out of range; valid blocks are 0.." + std::to_string(c.n_layer));
  }
  const int end_block = range.end_block < 0 ? c.n_layer : range.end_block;
  if (end_block < range.first_block || end_block > c.n_layer) {
    throw Error("re-run: blocks " + std::to_string(range.first_block) + " to " +
                std::to_string(end_block) + " are not a range of the model's 0.." +
                std::to_string(c.n_layer));
  }
  if (run.interventions != nullptr) {
    run.interventions->Validate(c);
    if (run.interventions->FirstChangedBlock(c.n_layer) < range.first_block) {
      throw Error("re-run from block " + std::to_string(range.first_block) +
                  ": the interventions change an earlier block, so its cache cannot be reused");
    }
    run.interventions->CheckRows(c, range.begin, range.end, range.first_block);
  }
  const int n = range.end - range.begin;
  buffers_->EnsureRows(n);
  std::copy_n(resid_in, size_t(n) * c.n_embd, buffers_->x.data());
  StartBlockTimes(range.first_block, run);
  return RunBlocks(range.first_block, end_block, range.begin, n, run,
                   !range.final_stream && end_block == c.n_layer);
}

// Blocks [first_block, L) of this call start at 0 ms; RunBlocks adds each chunk's time.
void Session::StartBlockTimes(int first_block, const RunOptions& run) {
  if (run.block_ms == nullptr) return;
  const int L = model_.config().n_layer;
  run.block_ms->resize(L, 0.0);
  std::fill(run.block_ms->begin() + first_block, run.block_ms->end(), 0.0);
}

const float* Session::RunBlocks(int first_block, int end_block, int pos0, int T,
                                const RunOptions& run, bool unembed) {
  const Interventions* iv = run.interventions;
  const int L = model_.config().n_layer;
  const int64_t C = model_.config().n_embd;
  float* x = buffers_->x.data();
  int64_t last = T - 1;  // the row of x holding position pos0 + T - 1
  for (int l = first_block; l < end_block; ++l) {
    const auto start = run.block_ms != nullptr ? std::chrono::steady_clock::now()
                                               : std::chrono::steady_clock::time_point();
    if (iv != nullptr && !iv->patches.empty()) PatchResidual(l, pos0, T, *iv);
    if (iv != nullptr) iv->EditStream(l, StreamPoint::kResidPre, pos0, T, x);
    if (run.observer) Report(run.observer, Hook::kResidPre, l, pos0, x, T, C);
    if (l == L - 1 && T > 1 && !run.observer) {
      // Only the last row leaves this call (its logits, or its residual stream for a probe),
      // and of the other rows of the last block only the keys and values are ever read again:
      // they skip the MLP (2/3 of a block's work), as llama.cpp's last layer keeps only the
      // rows whose logits are wanted. Attention runs on all rows at once, so the cache gets
      // the same bits as from a full pass; the last row's MLP then runs alone, as in a decode
      // step (the same values to rounding: the one-row kernels sum in another order).
      AttentionStep(l, pos0, T, run);
      std::copy_n(x + last * C, C, x);
      last = 0;
      MlpStep(l, pos0 + T - 1, 1, run);
    } else {
      AttentionStep(l, pos0, T, run);
      MlpStep(l, pos0, T, run);
    }
    if (run.block_ms != nullptr) {
      (*run.block_ms)[l] +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
    }
  }
  return unembed ? Unembed(pos0, T, last, run) : x + last * C;
}

// h = wte[id] + wpe[pos]. Rows are dequantized one at a time (any type).
// TransformerLens: hook_embed + hook_pos_embed, reported summed as "embed".
void Session::Embed(const int* ids, int pos0, int T, const RunOptions& run) {
  Buffers& b = *buffers_;
  const int64_t C = model_.config().n_embd;
  const WeightView& wte = model_.token_embedding;
  const WeightView& wpe = model_.position_embedding;
  const size_t te_row = RowBytes(wte.type, C), pe_row = RowBytes(wpe.type, C);
  float* x = b.x.data();
  for (int64_t t = 0; t < T; ++t) {
    DequantizeRow(wte.type, static_cast<const uint8_t*>(wte.data) + te_row * ids[t], x + t * C, C);
    DequantizeRow(wpe.type, static_cast<const uint8_t*>(wpe.data) + pe_row * (pos0 + t),
                  b.tmp.data(), C);
    AddInPlace(x + t * C, b.tmp.data(), C);
  }
  if (run.observer) Report(run.observer, Hook::kEmbed, -1, pos0, x, T, C);
}

void Session::PatchResidual(int layer, int pos0, int T, const Interventions& iv) {
  const int64_t C = model_.config().n_embd;
  for (const ResidPatch& p : iv.patches) {
    const int t = p.position - pos0;
    if (p.layer == layer && t >= 0 && t < T) {
      std::copy_n(p.value.data(), C, buffers_->x.data() + t * C);
    }
  }
}

// Pre-LN: x += proj(attn(ln_1(x))). With interventions also: heads ablated before the
// projection, the add skipped, replaced (no residual) or followed by ln_1 (post-norm).
void Session::AttentionStep(int l, int pos0, int T_int, const RunOptions& run) {
  const Config& c = model_.config();
  Buffers& b = *buffers_;
  const BlockWeights& w = model_.blocks[l];
  const int64_t T = T_int, C = c.n_embd;
  const Interventions* iv = run.interventions;
  float* x = b.x.data();
  // A frozen block's heads output is given: its ln_1, q, k and v are only for an observer that
  // asked, and it leaves the KV cache alone (path patching's frozen heads cost the projection).
  const FrozenAttention* frozen = iv != nullptr ? iv->Frozen(l) : nullptr;
  const bool inputs = frozen == nullptr || (frozen->inputs && run.observer);

  if (inputs) {
    ReadSublayer(iv != nullptr && iv->post_norm, x, w.ln1_g, w.ln1_b, b.xn.data(), T, C, c.ln_eps);
    MatMulOn(b.pool, b.matmul_input, b.xn.data(), T, w.qkv, w.qkv_b, b.qkv.data(), b.activations);
    if (iv != nullptr) PatchHeadInputs(*iv, l, c, pos0, T, b.qkv.data());
  }
  if (frozen != nullptr) {
    // Rows [pos0, pos0 + T) lie inside the given ones (Interventions::CheckRows).
    std::copy_n(frozen->heads.data() + (pos0 - frozen->pos0) * C, T * C, b.heads.data());
  } else {
    AttendHeads(l, pos0, T_int, run);
  }
  if (iv != nullptr) ReplaceHeadOutputs(*iv, l, c, pos0, T, b.heads.data());
  if (run.observer) ReportAttention(l, pos0, T_int, run, /*attended=*/frozen == nullptr, inputs);
  MatMulOn(b.pool, b.matmul_input, b.heads.data(), T, w.proj, w.proj_b, b.tmp.data(),
           b.activations);
  const bool skip = iv != nullptr && Interventions::Lists(iv->skip_attn, l);
  if (iv != nullptr) iv->EditStream(l, StreamPoint::kAttnOut, pos0, T_int, b.tmp.data());
  WriteSublayer(iv, l, skip, b.tmp.data(), w.ln1_g, w.ln1_b, x, T, C, c.ln_eps);
  if (iv != nullptr) iv->EditStream(l, StreamPoint::kResidMid, pos0, T_int, x);
  if (run.observer) {
    Report(run.observer, Hook::kAttnOut, l, pos0, b.tmp.data(), T, C);
    Report(run.observer, Hook::kResidMid, l, pos0, x, T, C);
  }
}

// Per head: its keys and values of positions [pos0, pos0 + T) (k and v of qkv) into the cache,
// then its T queries' attention over the cache into `heads`. A head's keys are stored by the
// thread that then attends over them (stored serially, the 8-bit rows were ~3 % of a two-thread
// prefill). An observer that wants them also gets every query's scores and probabilities.
void Session::AttendHeads(int l, int pos0, int T_int, const RunOptions& run) {
  const Config& c = model_.config();
  Buffers& b = *buffers_;
  const int64_t T = T_int, C = c.n_embd, D = c.head_dim(), n_keys = pos0 + T;
  const bool scoring = run.observer && run.observe_scores;
  const bool keep_probs = run.observer && run.observe_probs;
  if (scoring) b.obs_scores.resize(size_t(c.n_head) * T * n_keys);
  if (keep_probs) b.obs_probs.resize(size_t(c.n_head) * T * n_keys);
  b.pool.ParallelFor(c.n_head, [&](int64_t h) {
    const float* q = b.qkv.data() + h * D;  // row t of qkv: q | k | v at t * 3C
    b.kv.Store(l, h, pos0, T, q + C, q + 2 * C, 3 * C);
    HeadQueries io;
    io.q = q;
    io.q_stride = 3 * C;
    io.out = b.heads.data() + h * D;
    io.out_stride = C;
    io.probs = keep_probs ? b.obs_probs.data() + h * T * n_keys : b.probs.data() + h * c.n_ctx;
    io.probs_stride = keep_probs ? n_keys : 0;
    io.scores = scoring ? b.obs_scores.data() + h * T * n_keys : nullptr;
    io.scores_stride = n_keys;
    b.kv.Attend(l, h, pos0, T, io);
    // The observed rows span every key of the call: the ones query t may not see are the
    // masked -inf of attn_scores and the 0 of attn_probs.
    for (int64_t t = 0; t < T && (scoring || keep_probs); ++t) {
      const int64_t seen = pos0 + t + 1;
      if (scoring) {
        std::fill(io.scores + t * n_keys + seen, io.scores + (t + 1) * n_keys,
                  -std::numeric_limits<float>::infinity());
      }
      if (keep_probs) std::fill(io.probs + t * n_keys + seen, io.probs + (t + 1) * n_keys, 0.0f);
    }
  });
}

// What AttentionStep reports before the projection: ln_1's output, q, k and v regrouped by head
// ([H, T, D] each; not in a frozen block that did not compute them), the scores and probabilities
// AttendHeads kept (none in a frozen block, which did not attend), and the heads' output.
void Session::ReportAttention(int l, int pos0, int T_int, const RunOptions& run, bool attended,
                              bool inputs) {
  const Config& c = model_.config();
  Buffers& b = *buffers_;
  const int64_t T = T_int, C = c.n_embd, H = c.n_head, D = c.head_dim(), n_keys = pos0 + T;
  static const Hook kQkv[3] = {Hook::kQ, Hook::kK, Hook::kV};
  if (inputs) Report(run.observer, Hook::kLn1, l, pos0, b.xn.data(), T, C);
  if (inputs) b.observed.resize(std::max<size_t>(size_t(H) * T * D, b.observed.size()));
  for (int part = 0; part < 3 && inputs; ++part) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t t = 0; t < T; ++t) {
        std::copy_n(b.qkv.data() + t * 3 * C + part * C + h * D, D,
                    b.observed.data() + (h * T + t) * D);
      }
    }
    Report(run.observer, kQkv[part], l, pos0, b.observed.data(), H, T, D);
  }
  if (run.observe_scores && attended) {
    Report(run.observer, Hook::kAttnScores, l, pos0, b.obs_scores.data(), H, T, n_keys);
  }
  if (run.observe_probs && attended) {
    Report(run.observer, Hook::kAttnProbs, l, pos0, b.obs_probs.data(), H, T, n_keys);
  }
  Report(run.observer, Hook::kAttnHeads, l, pos0, b.heads.data(), T, C);
}

// Pre-LN: x += fc_proj(gelu(fc(ln_2(x)))); interventions as in AttentionStep.
void Session::MlpStep(int l, int pos0, int T_int, const RunOptions& run) {
  const Config& c = model_.config();
  Buffers& b = *buffers_;
  const BlockWeights& w = model_.blocks[l];
  const int64_t T = T_int, C = c.n_embd, F = c.n_ff;
  const bool observing = static_cast<bool>(run.observer);
  const Interventions* iv = run.interventions;
  const bool post_norm = iv != nullptr && iv->post_norm;
  float* x = b.x.data();

  ReadSublayer(post_norm, x, w.ln2_g, w.ln2_b, b.xn.data(), T, C, c.ln_eps);
  // GELU runs inside fc's row chunks unless the observer wants fc's output before it.
  MatMulOn(b.pool, b.matmul_input, b.xn.data(), T, w.fc, w.fc_b, b.ff.data(), b.activations,
           !observing);
  if (observing) {
    Report(run.observer, Hook::kLn2, l, pos0, b.xn.data(), T, C);
    Report(run.observer, Hook::kMlpPre, l, pos0, b.ff.data(), T, F);
    Gelu(b.ff.data(), T * F);
    Report(run.observer, Hook::kMlpAct, l, pos0, b.ff.data(), T, F);
  }
  MatMulOn(b.pool, b.matmul_input, b.ff.data(), T, w.fc_proj, w.fc_proj_b, b.tmp.data(),
           b.activations);
  const bool skip = iv != nullptr && Interventions::Lists(iv->skip_mlp, l);
  if (iv != nullptr) iv->EditStream(l, StreamPoint::kMlpOut, pos0, T_int, b.tmp.data());
  WriteSublayer(iv, l, skip, b.tmp.data(), w.ln2_g, w.ln2_b, x, T, C, c.ln_eps);
  if (iv != nullptr) iv->EditStream(l, StreamPoint::kResidPost, pos0, T_int, x);
  if (observing) {
    Report(run.observer, Hook::kMlpOut, l, pos0, b.tmp.data(), T, C);
    Report(run.observer, Hook::kResidPost, l, pos0, x, T, C);
  }
}

// Final LayerNorm and the unembedding. Unless an observer wants every position's logits, only
// the last position's are needed (in row last of x), which saves (T-1) * V * C multiply-adds in
// a prefill.
const float* Session::Unembed(int pos0, int T_int, int64_t last, const RunOptions& run) {
  const Config& c = model_.config();
  Buffers& b = *buffers_;
  const int64_t T = T_int, C = c.n_embd;
  const float* x = b.x.data();
  if (!run.observer) {
    FinalLogits(x + last * C, 1, b.logits.data());
    return b.logits.data();
  }
  for (int64_t t = 0; t < T; ++t)
    LayerNorm(x + t * C, model_.ln_f_g, model_.ln_f_b, c.ln_eps, C, b.xn.data() + t * C);
  Report(run.observer, Hook::kLnFinal, -1, pos0, b.xn.data(), T, C);
  if (run.observe_all_logits) {
    b.observed.resize(std::max<size_t>(size_t(T) * c.n_vocab, b.observed.size()));
    MatMulOn(b.pool, b.matmul_input, b.xn.data(), T, model_.output, nullptr, b.observed.data(),
             b.activations);
    Report(run.observer, Hook::kLogits, -1, pos0, b.observed.data(), T, c.n_vocab);
    std::copy_n(b.observed.data() + (T - 1) * c.n_vocab, c.n_vocab, b.logits.data());
  } else {
    MatMulOn(b.pool, b.matmul_input, b.xn.data() + (T - 1) * C, 1, model_.output, nullptr,
             b.logits.data(), b.activations);
  }
  return b.logits.data();
}

void Session::FinalLogits(const float* x, int n, float* logits) {
  const Config& c = model_.config();
  Buffers& b = *buffers_;
  const int64_t C = c.n_embd;
  b.EnsureRows(n);
  for (int64_t t = 0; t < n; ++t)
    LayerNorm(x + t * C, model_.ln_f_g, model_.ln_f_b, c.ln_eps, C, b.xn.data() + t * C);
  MatMulOn(b.pool, b.matmul_input, b.xn.data(), n, model_.output, nullptr, logits, b.activations);
}

}  // namespace gpt2
