// The backward pass of model/backward.h: the forward's named steps in reverse (llm.c's
// gpt2_backward order), each sublayer's backward written beside what its forward does in
// session.cc (AttentionStep, MlpStep, WriteSublayer). Products and the hot elementwise steps are
// kernels (kernels.h "Backward"); LayerNorm's backward, O(T C) a block, is plain loops here.
#include "model/backward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "base/error.h"
#include "format/quant.h"
#include "kernels/kernels.h"
#include "model/layer_norm.h"
#include "model/matmul_on.h"
#include "model/thread_pool.h"

namespace gpt2 {

Backward::Backward(const Model& model, int n_threads)
    : model_(model), own_pool_(new ThreadPool(n_threads)), pool_(own_pool_.get()) {}

Backward::Backward(const Model& model, ThreadPool& pool) : model_(model), pool_(&pool) {}

Backward::~Backward() = default;

void Backward::CheckDifferentiable(const Interventions& iv) {
  for (const StreamEdit& e : iv.stream_edits) {
    if (!e.backward) {
      throw Error("gradients cannot go through the stream edit " +
                  (e.name.empty() ? std::string("(unnamed)") : e.name) +
                  ": it has no backward; remove it to compute gradients");
    }
  }
}

void Backward::Forward(Session& session, const std::vector<int>& ids, const Interventions* iv,
                       const float* resid_in, HookSet also) {
  const Config& c = model_.config();
  const int T = static_cast<int>(ids.size());
  if (T <= 0) throw Error("nothing to run: the prompt has no tokens");
  if (iv != nullptr) {
    iv->Validate(c);
    CheckDifferentiable(*iv);
  }
  iv_ = iv != nullptr ? *iv : Interventions();
  // The forward runs the edits wrapped, so that each one's input rows are kept for its backward.
  Interventions run_iv = iv_;
  edit_in_.assign(iv_.stream_edits.size(), std::vector<float>(size_t(T) * c.n_embd));
  for (size_t i = 0; i < run_iv.stream_edits.size(); ++i) {
    const int64_t C = c.n_embd;
    std::vector<float>* in = &edit_in_[i];
    run_iv.stream_edits[i].edit = [in, C, edit = iv_.stream_edits[i].edit](int pos0, int rows,
                                                                           float* x) {
      std::copy_n(x, size_t(rows) * C, in->data() + size_t(pos0) * C);
      edit(pos0, rows, x);
    };
  }
  RunOptions run;
  // What the blocks' backward reads: the stream entering each block, q, k, v, the probabilities,
  // the stream after attention, the MLP's input to GELU; under post-norm the sublayers' outputs
  // (the sums before its norms); the stream entering block 0 and the final stream.
  Keep keep{{Hook::kEmbed, Hook::kResidPre, Hook::kQ, Hook::kK, Hook::kV, Hook::kAttnProbs,
             Hook::kResidMid, Hook::kMlpPre},
            /*final_stream=*/true};
  if (iv_.post_norm) keep.hooks |= {Hook::kAttnOut, Hook::kMlpOut};
  keep.hooks |= also;
  RecordActs(c, keep, acts_, run);
  run.interventions = iv != nullptr ? &run_iv : nullptr;
  const bool same_ids = T_ == T && ids_ == ids && session.position() == T;
  T_ = 0;  // until this forward completes
  if (resid_in == nullptr) {
    session.Reset();
    session.Prefill(ids.data(), T, run);
  } else {
    // Session::Rerun needs the positions held; a plain run gives them once for every step of
    // integrated gradients.
    if (!same_ids) {
      session.Reset();
      session.Prefill(ids.data(), T, RunOptions());
    }
    // The re-run from block 0 reports no "embed": the stream given is it.
    acts_.embed.assign(resid_in, resid_in + size_t(T) * c.n_embd);
    RerunRange range{0, T, 0, /*final_stream=*/true};
    session.Rerun(range, resid_in, run);
  }
  ids_ = ids;
  T_ = T;
}

void Backward::Logits(Session& session, int position, std::vector<float>& logits) {
  const Config& c = model_.config();
  if (position < 0 || position >= T_) {
    throw Error("position " + std::to_string(position) +
                " is out of range; valid positions are 0.." + std::to_string(T_ - 1));
  }
  logits.resize(c.n_vocab);
  session.FinalLogits(acts_.Row(acts_.final_stream, position), 1, logits.data());
}

double Backward::Metric(Session& session, const MetricSpec& spec) {
  std::vector<float> logits;
  Logits(session, spec.position, logits);
  const int V = model_.config().n_vocab;
  if (spec.target < 0 || spec.target >= V || spec.contrast >= V) {
    throw Error("token id out of range; valid ids are 0.." + std::to_string(V - 1));
  }
  return double(logits[spec.target]) - (spec.contrast >= 0 ? double(logits[spec.contrast]) : 0.0);
}

int64_t Backward::SavedBytes() const {
  int64_t floats = int64_t(acts_.embed.size()) + int64_t(acts_.final_stream.size());
  for (const BlockActs& b : acts_.blocks) {
    for (const std::vector<float>* v :
         {&b.resid_pre, &b.q, &b.k, &b.v, &b.pattern, &b.resid_mid, &b.mlp_pre, &b.attn_out,
          &b.mlp_out, &b.ln1, &b.scores, &b.z, &b.ln2, &b.mlp_post, &b.resid_post}) {
      floats += int64_t(v->size());
    }
  }
  return floats * int64_t(sizeof(float));
}

void Backward::LayerNormBackwardRows(const float* x, const float* gamma, const float* dy, float* dx,
                                     int64_t rows, bool accumulate) const {
  LayerNormBackward(x, gamma, dy, dx, rows, model_.config().n_embd, model_.config().ln_eps,
                    accumulate);
}

void Backward::Transposed(const float* dy, int64_t rows, const WeightView& w, float* dx) {
  MatMulTransposedOn(*pool_, dy, rows, w, dx);
}

// dz [rows, C] (heads concatenated) back through each head's causal attention to dq, dk, dv
// ([H, T, D], reported), then past block l's head-input patches into dqkv_.
void Backward::AttentionBackward(int l, int64_t first, int64_t rows, const float* dz,
                                 const ActivationObserver& grads) {
  const Config& c = model_.config();
  const int64_t T = T_, C = c.n_embd, H = c.n_head, D = c.head_dim();
  const float scale = c.attn_scale();
  const BlockActs& s = acts_.blocks[l];
  std::fill(dq_.begin(), dq_.end(), 0.0f);
  std::fill(dk_.begin(), dk_.end(), 0.0f);
  std::fill(dv_.begin(), dv_.end(), 0.0f);
  std::fill(dscores_.begin(), dscores_.end(), 0.0f);
  pool_->ParallelFor(H, [&](int64_t h) {
    const float* k = s.k.data() + h * T * D;
    const float* v = s.v.data() + h * T * D;
    for (int64_t t = first; t < rows; ++t) {
      AttentionHeadBackward(s.q.data() + (h * T + t) * D, k, v, D,
                            s.pattern.data() + (h * T + t) * T, dz + t * C + h * D, t + 1, D, scale,
                            dq_.data() + (h * T + t) * D, dk_.data() + h * T * D,
                            dv_.data() + h * T * D, D, dscores_.data() + (h * T + t) * T);
    }
  });
  ReportHeadInputs(l, grads);
  QkvRows(l, rows);
}

void Backward::ReportHeadInputs(int l, const ActivationObserver& grads) {
  const Config& c = model_.config();
  const int64_t T = T_, H = c.n_head, D = c.head_dim();
  Report(grads, Hook::kAttnScores, l, 0, dscores_.data(), H, T, T);
  Report(grads, Hook::kQ, l, 0, dq_.data(), H, T, D);
  Report(grads, Hook::kK, l, 0, dk_.data(), H, T, D);
  Report(grads, Hook::kV, l, 0, dv_.data(), H, T, D);
}

// dq_, dk_, dv_ ([H, T, D]) into dqkv_ [rows, 3C] in the forward's q | k | v row layout; a head
// input patched with given values (HeadPatch) passes nothing back to the product.
void Backward::QkvRows(int l, int64_t rows) {
  const Config& c = model_.config();
  const int64_t T = T_, C = c.n_embd, H = c.n_head, D = c.head_dim();
  float* parts[3] = {dq_.data(), dk_.data(), dv_.data()};
  for (const HeadPatch& p : iv_.head_patches) {
    if (p.layer != l || p.part == HeadPart::kOutput) continue;
    float* d = parts[p.part == HeadPart::kQuery ? 0 : p.part == HeadPart::kKey ? 1 : 2];
    const int64_t end = std::min<int64_t>(T, p.pos0 + int64_t(p.values.size()) / D);
    for (int64_t t = std::max<int64_t>(p.pos0, 0); t < end; ++t)
      std::fill_n(d + (p.head * T + t) * D, D, 0.0f);
  }
  for (int64_t t = 0; t < rows; ++t) {
    for (int part = 0; part < 3; ++part) {
      for (int64_t h = 0; h < H; ++h) {
        std::copy_n(parts[part] + (h * T + t) * D, D, dqkv_.data() + t * 3 * C + part * C + h * D);
      }
    }
  }
}

// The vector-Jacobian products of block l's stream edits at `point`, the last applied first, on
// the gradient rows [lo, rows) of g [T, C] (the rows before lo carry none).
void Backward::EditsBackward(int l, StreamPoint point, int64_t lo, int64_t rows, float* g) const {
  const int64_t C = model_.config().n_embd;
  for (size_t i = iv_.stream_edits.size(); i-- > 0;) {
    const StreamEdit& e = iv_.stream_edits[i];
    if (e.layer != l || e.point != point || rows <= lo) continue;
    e.backward(int(lo), int(rows - lo), edit_in_[i].data() + lo * C, g + lo * C);
  }
}

void Backward::Prepare() {
  const Config& c = model_.config();
  const int64_t T = T_, C = c.n_embd, F = c.n_ff, H = c.n_head, D = c.head_dim();
  for (std::vector<float>* v : {&g_, &dx_, &dsub_, &dz_, &tmp_, &report_})
    v->assign(size_t(T) * C, 0.0f);
  dff_.assign(size_t(T) * F, 0.0f);
  dqkv_.assign(size_t(T) * 3 * C, 0.0f);
  for (std::vector<float>* v : {&dq_, &dk_, &dv_}) v->assign(size_t(H) * T * D, 0.0f);
  dscores_.assign(size_t(H) * T * T, 0.0f);
}

void Backward::Run(const MetricSpec& spec, const ActivationObserver& grads) {
  const Config& c = model_.config();
  if (T_ == 0) throw Error("backward: no forward pass to go back through");
  if (spec.position < 0 || spec.position >= T_) {
    throw Error("position " + std::to_string(spec.position) +
                " is out of range; valid positions are 0.." + std::to_string(T_ - 1));
  }
  if (spec.target < 0 || spec.target >= c.n_vocab || spec.contrast >= c.n_vocab) {
    throw Error("token id out of range; valid ids are 0.." + std::to_string(c.n_vocab - 1));
  }
  const int64_t T = T_, C = c.n_embd;
  Prepare();
  float* g = g_.data();

  // Unembedding and ln_f: dm/d ln_f[position] = W_out[target] - W_out[contrast].
  {
    const WeightView& out = model_.output;
    const size_t row_bytes = RowBytes(out.type, C);
    float* d = report_.data() + spec.position * C;
    DequantizeRow(out.type, static_cast<const uint8_t*>(out.data) + row_bytes * spec.target, d, C);
    if (spec.contrast >= 0) {
      DequantizeRow(out.type, static_cast<const uint8_t*>(out.data) + row_bytes * spec.contrast,
                    tmp_.data(), C);
      for (int64_t i = 0; i < C; ++i) d[i] -= tmp_[i];
    }
    Report(grads, Hook::kLnFinal, -1, 0, report_.data(), T, C);
    LayerNormBackwardRows(acts_.Row(acts_.final_stream, spec.position), model_.ln_f_g, d,
                          g + spec.position * C, 1, false);
  }
  Blocks(c.n_layer - 1, spec.position, nullptr, grads);
}

void Backward::CheckScore(const ScoreSpec& spec) const {
  const Config& c = model_.config();
  if (T_ == 0) throw Error("backward: no forward pass to go back through");
  if (spec.layer < 0 || spec.layer >= c.n_layer) {
    throw Error("layer " + std::to_string(spec.layer) + " is out of range; valid layers are 0.." +
                std::to_string(c.n_layer - 1));
  }
  if (spec.head < 0 || spec.head >= c.n_head) {
    throw Error("head " + std::to_string(spec.head) + " is out of range; valid heads are 0.." +
                std::to_string(c.n_head - 1));
  }
  if (spec.query < 0 || spec.query >= T_) {
    throw Error("query position " + std::to_string(spec.query) +
                " is out of range; valid positions are 0.." + std::to_string(T_ - 1));
  }
  if (spec.key < 0 || spec.key > spec.query) {
    throw Error("key position " + std::to_string(spec.key) + " is out of range; the query at " +
                std::to_string(spec.query) + " sees positions 0.." + std::to_string(spec.query));
  }
  if (Interventions::Lists(iv_.skip_attn, spec.layer)) {
    throw Error("block " + std::to_string(spec.layer) +
                "'s attention is skipped: it has no scores");
  }
  if (iv_.Frozen(spec.layer) != nullptr) {
    throw Error("block " + std::to_string(spec.layer) +
                "'s attention is frozen (its heads' outputs are given): it has no scores");
  }
}

double Backward::Score(const ScoreSpec& spec) const {
  CheckScore(spec);
  const Config& c = model_.config();
  const int64_t T = T_, D = c.head_dim();
  const BlockActs& s = acts_.blocks[spec.layer];
  const float* q = s.q.data() + (spec.head * T + spec.query) * D;
  const float* k = s.k.data() + (spec.head * T + spec.key) * D;
  double dot = 0.0;
  for (int64_t d = 0; d < D; ++d) dot += double(q[d]) * k[d];
  return dot * c.attn_scale();
}

void Backward::RunScore(const ScoreSpec& spec, const ActivationObserver& grads) {
  CheckScore(spec);
  Prepare();
  Blocks(spec.layer, spec.query, &spec, grads);
}

// Blocks top..0 backward from the gradient in g_ (rows from `lo` on) or, with `score`, from that
// attention score of block top (g_ is zero: nothing above the score depends on it). Each block
// is its forward's steps (session.cc RunBlocks) in reverse: MlpStep, AttentionStep, then the
// stream entering it.
void Backward::Blocks(int top, int64_t lo, const ScoreSpec* score,
                      const ActivationObserver& grads) {
  const Config& c = model_.config();
  const int64_t T = T_, F = c.n_ff, H = c.n_head;
  // Attention is causal: rows after the metric's position get no gradient. Rows [lo, rows) may
  // carry gradient: at first only the metric's row; after a block's attention (keys and values
  // of every earlier row) all of them. So the last block's MLP and output projection run on that
  // one row.
  const int64_t rows = lo + 1;
  // What a skipped or frozen step reports: kept between passes (XL's scores at 1024 tokens are
  // 100 MB) and never written, so it stays zero; sized only when something needs it.
  if (!iv_.skip_attn.empty() || !iv_.skip_mlp.empty() || !iv_.frozen_attn.empty()) {
    const size_t need = size_t(std::max<int64_t>(H * T * T, T * F));
    if (zeros_.size() < need) zeros_.resize(need, 0.0f);
  }
  for (int l = top; l >= 0; --l) {
    bool attended;
    if (score != nullptr && l == score->layer) {
      ScoreBackward(*score, rows, grads);
      attended = true;
      lo = 0;
    } else {
      Report(grads, Hook::kResidPost, l, 0, g_.data(), T, c.n_embd);
      MlpStepBackward(l, lo, rows, grads);
      attended = AttentionStepBackward(l, lo, rows, grads);
      if (attended) lo = 0;
    }
    Ln1Backward(l, rows, attended, grads);
    ResidPreBackward(l, rows, grads);
  }
  Report(grads, Hook::kEmbed, -1, 0, g_.data(), T, c.n_embd);
}

// The score's own gradient: ds/dq[query] = scale k[key], ds/dk[key] = scale q[query] (s = scale
// q.k, before softmax), into dqkv_.
void Backward::ScoreBackward(const ScoreSpec& score, int64_t rows,
                             const ActivationObserver& grads) {
  const Config& c = model_.config();
  const int64_t T = T_, D = c.head_dim();
  const int64_t h = score.head, tq = score.query, tk = score.key;
  const float scale = c.attn_scale();
  const BlockActs& s = acts_.blocks[score.layer];
  std::fill(dq_.begin(), dq_.end(), 0.0f);
  std::fill(dk_.begin(), dk_.end(), 0.0f);
  std::fill(dv_.begin(), dv_.end(), 0.0f);
  std::fill(dscores_.begin(), dscores_.end(), 0.0f);
  for (int64_t d = 0; d < D; ++d) {
    dq_[(h * T + tq) * D + d] = scale * s.k[(h * T + tk) * D + d];
    dk_[(h * T + tk) * D + d] += scale * s.q[(h * T + tq) * D + d];
  }
  dscores_[(h * T + tq) * T + tk] = 1.0f;
  ReportHeadInputs(score.layer, grads);
  QkvRows(score.layer, rows);
}

// Post-norm's step x' = ln((x unless no residual) + out): g_ on rows [lo, rows) from dm/dx' to
// dm/d(the sum).
void Backward::PostNormBackward(const std::vector<float>& x, const std::vector<float>& out,
                                bool nores, const float* gamma, int64_t lo, int64_t rows) {
  const int64_t C = model_.config().n_embd;
  for (int64_t i = lo * C; i < rows * C; ++i) tmp_[i] = nores ? out[i] : x[i] + out[i];
  LayerNormBackwardRows(tmp_.data() + lo * C, gamma, g_.data() + lo * C, dsub_.data() + lo * C,
                        rows - lo, false);
  std::copy_n(dsub_.data() + lo * C, (rows - lo) * C, g_.data() + lo * C);
}

// MlpStep's backward: g_ holds dm/d(resid_out) on rows [lo, rows); leaves dm/d(resid_mid).
//   x2 = edits_resid_post([post-norm: ln_2]((x1 unless no residual) + edits_mlp_out(f))),
//   f = fc_proj(gelu(fc(ln_2(x1)))), or x2 = edits_resid_post(x1) when the MLP is skipped.
void Backward::MlpStepBackward(int l, int64_t lo, int64_t rows, const ActivationObserver& grads) {
  const Config& c = model_.config();
  const int64_t T = T_, C = c.n_embd, F = c.n_ff, n = rows - lo;
  const BlockWeights& w = model_.blocks[l];
  const BlockActs& s = acts_.blocks[l];
  const bool post = iv_.post_norm;
  const bool nores = Interventions::Lists(iv_.no_residual, l);
  float* g = g_.data();
  EditsBackward(l, StreamPoint::kResidPost, lo, rows, g);
  if (Interventions::Lists(iv_.skip_mlp, l)) {
    for (Hook h : {Hook::kMlpOut, Hook::kLn2}) Report(grads, h, l, 0, zeros_.data(), T, C);
    for (Hook h : {Hook::kMlpAct, Hook::kMlpPre}) Report(grads, h, l, 0, zeros_.data(), T, F);
    Report(grads, Hook::kResidMid, l, 0, g, T, C);
    return;
  }
  if (post) PostNormBackward(s.resid_mid, s.mlp_out, nores, w.ln2_g, lo, rows);
  std::copy_n(g, rows * C, dsub_.data());  // d(edited f)
  Report(grads, Hook::kMlpOut, l, 0, dsub_.data(), T, C);
  EditsBackward(l, StreamPoint::kMlpOut, lo, rows, dsub_.data());
  Transposed(dsub_.data() + lo * C, n, w.fc_proj, dff_.data() + lo * F);
  Report(grads, Hook::kMlpAct, l, 0, dff_.data(), T, F);
  GeluBackward(s.mlp_pre.data() + lo * F, dff_.data() + lo * F, dff_.data() + lo * F, n * F);
  Report(grads, Hook::kMlpPre, l, 0, dff_.data(), T, F);
  Transposed(dff_.data() + lo * F, n, w.fc, dx_.data() + lo * C);
  Report(grads, Hook::kLn2, l, 0, dx_.data(), T, C);
  if (nores) std::fill_n(g, rows * C, 0.0f);
  if (post)
    AddInPlace(g + lo * C, dx_.data() + lo * C, n * C);
  else
    LayerNormBackwardRows(s.resid_mid.data() + lo * C, w.ln2_g, dx_.data() + lo * C, g + lo * C, n,
                          true);
  Report(grads, Hook::kResidMid, l, 0, g, T, C);
}

// AttentionStep's backward up to the heads' inputs: g_ holds dm/d(resid_mid) on rows [lo, rows);
// leaves in g_ what reaches the stream entering the block by the residual path, and, when the
// block attended (returned), the gradient of its qkv product in dqkv_ (rows [0, rows)).
//   x1 = edits_resid_mid([post-norm: ln_1]((x0 unless no residual) + edits_attn_out(proj(z)))),
//   z = the heads' outputs, after patches and ablation (constants: no gradient passes them), or
//   the given ones of a frozen block; x1 = edits_resid_mid(x0) when the attention is skipped.
bool Backward::AttentionStepBackward(int l, int64_t lo, int64_t rows,
                                     const ActivationObserver& grads) {
  const Config& c = model_.config();
  const int64_t T = T_, C = c.n_embd, H = c.n_head, D = c.head_dim(), n = rows - lo;
  const BlockWeights& w = model_.blocks[l];
  const BlockActs& s = acts_.blocks[l];
  const bool post = iv_.post_norm;
  const bool nores = Interventions::Lists(iv_.no_residual, l);
  float* g = g_.data();
  EditsBackward(l, StreamPoint::kResidMid, lo, rows, g);
  if (Interventions::Lists(iv_.skip_attn, l)) {
    for (Hook h : {Hook::kAttnOut, Hook::kAttnHeads}) Report(grads, h, l, 0, zeros_.data(), T, C);
    Report(grads, Hook::kAttnScores, l, 0, zeros_.data(), H, T, T);
    for (Hook h : {Hook::kQ, Hook::kK, Hook::kV}) Report(grads, h, l, 0, zeros_.data(), H, T, D);
    return false;
  }
  if (post) PostNormBackward(s.resid_pre, s.attn_out, nores, w.ln1_g, lo, rows);
  Report(grads, Hook::kAttnOut, l, 0, g, T, C);
  std::copy_n(g, rows * C, dsub_.data());
  EditsBackward(l, StreamPoint::kAttnOut, lo, rows, dsub_.data());
  Transposed(dsub_.data() + lo * C, n, w.proj, dz_.data() + lo * C);
  Report(grads, Hook::kAttnHeads, l, 0, dz_.data(), T, C);
  if (nores) std::fill_n(g, rows * C, 0.0f);
  // Ablated and patched heads' outputs are constants: nothing flows back through their attention.
  for (const HeadRef& a : iv_.ablate_heads) {
    if (a.layer != l) continue;
    for (int64_t t = 0; t < rows; ++t) std::fill_n(dz_.data() + t * C + a.head * D, D, 0.0f);
  }
  for (const HeadPatch& p : iv_.head_patches) {
    if (p.layer != l || p.part != HeadPart::kOutput) continue;
    const int64_t end = std::min<int64_t>(rows, p.pos0 + int64_t(p.values.size()) / D);
    for (int64_t t = std::max<int64_t>(p.pos0, 0); t < end; ++t)
      std::fill_n(dz_.data() + t * C + p.head * D, D, 0.0f);
  }
  if (iv_.Frozen(l) != nullptr) {
    Report(grads, Hook::kAttnScores, l, 0, zeros_.data(), H, T, T);
    for (Hook h : {Hook::kQ, Hook::kK, Hook::kV}) Report(grads, h, l, 0, zeros_.data(), H, T, D);
    return false;
  }
  AttentionBackward(l, lo, rows, dz_.data(), grads);
  return true;
}

// ln_1 and the qkv product backward (dqkv_ into g_), when the block attended.
void Backward::Ln1Backward(int l, int64_t rows, bool attended, const ActivationObserver& grads) {
  const Config& c = model_.config();
  const int64_t T = T_, C = c.n_embd;
  if (!attended) {
    Report(grads, Hook::kLn1, l, 0, zeros_.data(), T, C);
    return;
  }
  const BlockWeights& w = model_.blocks[l];
  Transposed(dqkv_.data(), rows, w.qkv, dx_.data());
  Report(grads, Hook::kLn1, l, 0, dx_.data(), T, C);
  if (iv_.post_norm)
    AddInPlace(g_.data(), dx_.data(), rows * C);
  else
    LayerNormBackwardRows(acts_.blocks[l].resid_pre.data(), w.ln1_g, dx_.data(), g_.data(), rows,
                          true);
}

// The stream entering block l: g_ is dm/d(resid_pre) as the block read it; back through its edits
// to the stream as patched, and a patched position (a constant) passes nothing further back.
void Backward::ResidPreBackward(int l, int64_t rows, const ActivationObserver& grads) {
  const int64_t C = model_.config().n_embd;
  float* g = g_.data();
  Report(grads, Hook::kResidPre, l, 0, g, T_, C);
  EditsBackward(l, StreamPoint::kResidPre, 0, rows, g);
  for (const ResidPatch& p : iv_.patches) {
    if (p.layer == l && p.position < rows) std::fill_n(g + int64_t(p.position) * C, C, 0.0f);
  }
}

}  // namespace gpt2
