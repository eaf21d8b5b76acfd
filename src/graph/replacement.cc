// The replacement model of graph/replacement.h: the real run read from its record, the
// transcoders' features and errors, the targets, and the backward's named steps.
#include "graph/replacement.h"

#include <algorithm>

#include "format/quant.h"
#include "kernels/kernels.h"
#include "model/layer_norm.h"
#include "model/matmul_on.h"
#include "model/thread_pool.h"

namespace gpt2 {

namespace {

// 1/sigma of each row of x [T, C], held in float as the graph's build always has: the edges are
// products of these, and rounding them otherwise moves the last digits of its file.
std::vector<float> FrozenInvSigmas(const std::vector<float>& x, int T, int C, double eps) {
  const std::vector<double> inv = RowInvSigmas(x.data(), T, C, eps);
  return std::vector<float>(inv.begin(), inv.end());
}

// x[0, n) = 0, in a few chunks over the pool.
void ZeroOn(ThreadPool& pool, float* x, int64_t n) {
  const int64_t n_chunks = std::min<int64_t>(pool.size() * 4, (n + 4095) / 4096);
  if (n_chunks <= 1) {
    std::fill_n(x, n, 0.0f);
    return;
  }
  pool.ParallelFor(n_chunks, [&](int64_t chunk) {
    const int64_t begin = n * chunk / n_chunks, end = n * (chunk + 1) / n_chunks;
    std::fill(x + begin, x + end, 0.0f);
  });
}

}  // namespace

ReplacementModel::ReplacementModel(Session& session, const TranscoderSet& transcoders,
                                   const std::vector<int>& ids)
    : model_(session.model()),
      pool_(session.pool()),
      transcoders_(transcoders),
      T_(static_cast<int>(ids.size())) {
  const Config& c = model_.config();
  const int T = T_, C = c.n_embd, L = c.n_layer;
  RunOptions run;
  RecordActs(c,
             Keep{{Hook::kEmbed, Hook::kResidPre, Hook::kAttnProbs, Hook::kResidMid, Hook::kMlpOut},
                  /*final_stream=*/true},
             run_, run);
  // Every row's logits, though only the last row's are read: the unembedding of all T rows at
  // once rounds that row as the graph always has (with f32 weights a one-row product differs in
  // the 8th digit, which moves the logits' probabilities and so the influences in the file).
  run.observe_all_logits = true;
  session.Reset();
  const float* logits = session.Prefill(ids.data(), T, run);
  last_logits_.assign(logits, logits + c.n_vocab);
  for (int l = 0; l < L; ++l) {
    ln1_inv_.push_back(FrozenInvSigmas(run_.blocks[l].resid_pre, T, C, c.ln_eps));
    ln2_inv_.push_back(FrozenInvSigmas(run_.blocks[l].resid_mid, T, C, c.ln_eps));
  }
  lnf_inv_ = FrozenInvSigmas(run_.final_stream, T, C, c.ln_eps);
  writes_.resize(int64_t(L) * T);
  errors_.resize(L);
}

void ReplacementModel::EncodeBlock(int l) {
  const int T = T_, C = run_.C;
  errors_[l] = run_.blocks[l].mlp_out;
  const Sae* tc = transcoders_.block(l);
  if (tc == nullptr) return;
  const int S = tc->d_sae();
  std::vector<float> acts(int64_t(T) * S);
  SaeScratch scratch;
  tc->Encode(run_.blocks[l].resid_mid.data(), T, acts.data(), nullptr, scratch, &pool_);
  // Each position's features take the next columns, in order (circuit-tracer's zero_bos: none at
  // the BOS); counted first, so that the positions then run on the pool, each into its own rows.
  std::vector<int64_t> first(T + 1, static_cast<int64_t>(features_.size()));
  for (int p = 0; p < T; ++p) {
    int64_t n = 0;
    if (p > 0) {
      for (int j = 0; j < S; ++j) n += acts[int64_t(p) * S + j] > 0;
    }
    first[p + 1] = first[p] + n;
  }
  features_.resize(first[T]);
  pool_.ParallelFor(T, [&](int64_t task) {
    const int p = static_cast<int>(task);
    std::vector<float> row(C);
    float* err = errors_[l].data() + int64_t(p) * C;
    for (int i = 0; i < C; ++i) err[i] -= tc->decoder_bias()[i];
    FeatureWrites& w = writes_[int64_t(l) * T + p];
    const int64_t n = first[p + 1] - first[p];
    // Room for the position's writes at once: grown a feature at a time, their copies left holes
    // in WebAssembly's heap (bench-graph.mjs's three graphs grew it by 50 MB more).
    w.rows.reserve(n * C);
    w.columns.reserve(n);
    int64_t k = 0;
    for (int j = 0; j < S; ++j) {
      const float a = acts[int64_t(p) * S + j];
      if (!(a > 0)) continue;
      tc->DecoderRowInto(j, row.data());
      for (int i = 0; i < C; ++i) err[i] -= a * row[i];
      if (p == 0) continue;
      w.rows.resize((k + 1) * C);
      for (int i = 0; i < C; ++i) w.rows[k * C + i] = a * row[i];
      w.columns.push_back(static_cast<int>(first[p] + k));
      features_[first[p] + k] = ActiveFeature{l, p, j, a};
      ++k;
    }
  });
}

std::vector<AttributionTarget> ReplacementModel::LogitTargets(
    const std::vector<int>& tokens) const {
  const Config& c = model_.config();
  const int C = c.n_embd;
  const WeightView& unembed = model_.output;
  const size_t row_bytes = RowBytes(unembed.type, C);
  const auto unembed_row = [&](int v) {
    return static_cast<const uint8_t*>(unembed.data) + row_bytes * v;
  };
  std::vector<float> row(C);
  std::vector<double> mean_u(C, 0.0);
  for (int v = 0; v < c.n_vocab; ++v) {
    DequantizeRow(unembed.type, unembed_row(v), row.data(), C);
    for (int i = 0; i < C; ++i) mean_u[i] += row[i];
  }
  for (double& m : mean_u) m /= c.n_vocab;
  std::vector<AttributionTarget> targets;
  for (int t : tokens) {
    DequantizeRow(unembed.type, unembed_row(t), row.data(), C);
    for (int i = 0; i < C; ++i) row[i] = static_cast<float>(row[i] - mean_u[i]);
    AttributionTarget target{c.n_layer, T_ - 1, std::vector<float>(C, 0.0f)};
    FrozenLayerNormBackward(row.data(), model_.ln_f_g, lnf_inv_[T_ - 1], C, target.inject.data());
    targets.push_back(std::move(target));
  }
  return targets;
}

AttributionTarget ReplacementModel::FeatureTarget(const ActiveFeature& f) const {
  const int C = run_.C;
  std::vector<float> row(C);
  transcoders_.block(f.layer)->EncoderRowInto(f.feature, row.data());
  AttributionTarget target{f.layer, f.position, std::vector<float>(C, 0.0f)};
  FrozenLayerNormBackward(row.data(), nullptr, ln2_inv_[f.layer][f.position], C,
                          target.inject.data());
  return target;
}

ReplacementBackward::ReplacementBackward(const ReplacementModel& replacement, ThreadPool& pool,
                                         AttributionColumns columns)
    : replacement_(replacement),
      pool_(pool),
      columns_(columns),
      C_(replacement.model().config().n_embd),
      T_(replacement.tokens()) {}

void ReplacementBackward::Run(const std::vector<const AttributionTarget*>& targets, float* rows) {
  const int L = replacement_.model().config().n_layer;
  targets_ = &targets;
  rows_ = rows;
  B_ = static_cast<int>(targets.size());
  P_ = 0;
  int top = -1;
  for (const AttributionTarget* t : targets) {
    P_ = std::max(P_, t->position + 1);
    top = std::max(top, std::min(t->layer, L - 1));
  }
  // Both zeroed on the pool: the rows are the graph's first write to them (GraphBuild leaves its
  // rows unset), several MB a batch.
  const int64_t R = int64_t(P_) * B_;
  if (static_cast<int64_t>(g_.size()) < R * C_) g_.resize(R * C_);
  ZeroOn(pool_, rows, int64_t(B_) * columns_.size);
  ZeroOn(pool_, g_.data(), R * C_);
  gc_.resize(R * C_);
  gz_.resize(R * C_);
  gv_.resize(R * C_);
  InjectTargets(L);  // the logits', at the final stream
  for (int l = top; l >= 0; --l) {
    MlpOutputEdges(l);
    InjectTargets(l);
    if (LiveRows(l) == 0) continue;
    AttentionBackward(l);
    Ln1Backward(l);
  }
  EmbeddingEdges();
}

// Takes g at the stream leaving block l; writes every target's edges from the block's features
// (W = their writes [n, C]: g W^T, one product per position, over the rows that cross the MLP)
// and from its errors (err . g). The positions split over the pool; their columns differ.
void ReplacementBackward::MlpOutputEdges(int l) {
  const int P = std::min(P_, T_);
  out_at_.resize(P);
  int64_t size = 0;
  for (int p = 0; p < P; ++p) {
    out_at_[p] = size;
    size += int64_t(B_) * static_cast<int64_t>(replacement_.writes(l, p).columns.size());
  }
  out_.resize(size);
  pool_.ParallelFor(P, [&](int64_t task) {
    const int p = static_cast<int>(task);
    // The span of rows that cross; the rows between that do not are zeros, left out of the edges.
    int lo = 0, hi = B_;
    while (lo < B_ && !CrossesMlp(l, p, lo)) ++lo;
    while (hi > lo && !CrossesMlp(l, p, hi - 1)) --hi;
    if (lo == hi) return;
    const FeatureWrites& w = replacement_.writes(l, p);
    const int n = static_cast<int>(w.columns.size());
    float* out = out_.data() + out_at_[p];
    if (n > 0) {
      MatMul(G(p, lo), hi - lo, WeightView{TensorType::kF32, w.rows.data(), n, C_}, nullptr, out, 0,
             n);
    }
    const float* e = replacement_.error(l, p);
    for (int b = lo; b < hi; ++b) {
      if (!CrossesMlp(l, p, b)) continue;
      for (int j = 0; j < n; ++j) Row(b)[w.columns[j]] = out[int64_t(b - lo) * n + j];
      const float* gb = G(p, b);
      double d = 0;
      for (int i = 0; i < C_; ++i) d += double(e[i]) * gb[i];
      Row(b)[columns_.errors + int64_t(l) * T_ + p] = static_cast<float>(d);
    }
  });
}

// Adds each target of block `layer` (n_layer: the logits) to g at its position: the targets read
// the stream there, block l's at its resid_mid, where g stands once its MLP is passed.
void ReplacementBackward::InjectTargets(int layer) {
  for (int b = 0; b < B_; ++b) {
    const AttributionTarget& t = *(*targets_)[b];
    if (t.layer != layer) continue;
    float* gb = G(t.position, b);
    for (int i = 0; i < C_; ++i) gb[i] += t.inject[i];
  }
}

// The rows of g that go through block l's attention: row (p, b) is zero unless target b reads at
// or above this block and p <= its position (causal attention carries nothing back to later
// positions). Batches mix positions and blocks, so the dense [P, B] rows were half zeros on a
// 16-token prompt (BENCHMARKS.md, "Attribution graphs"). Leaves live_ and slot_; returns their
// number.
int64_t ReplacementBackward::LiveRows(int l) {
  live_.clear();
  slot_.assign(int64_t(P_) * B_, -1);
  for (int p = 0; p < P_; ++p) {
    for (int b = 0; b < B_; ++b) {
      const AttributionTarget& t = *(*targets_)[b];
      if (t.layer >= l && p <= t.position) {
        slot_[int64_t(p) * B_ + b] = static_cast<int>(live_.size());
        live_.push_back(int64_t(p) * B_ + b);
      }
    }
  }
  return static_cast<int64_t>(live_.size());
}

// Attention with frozen probabilities A [H, T, T]: z[p] = sum_q A[p, q] v[q], v = ln_1(x) W_v +
// b, out = z W_proj. Takes the live rows of g (at the block's attention output); leaves in gz_
// their gradient at ln_1's output, [n_live, C]: g W_proj^T, then per head A^T, then W_v^T.
void ReplacementBackward::AttentionBackward(int l) {
  const Config& c = replacement_.model().config();
  const int H = c.n_head, D = c.head_dim(), T = T_, C = C_, B = B_;
  const int64_t n_live = static_cast<int64_t>(live_.size());
  for (int64_t i = 0; i < n_live; ++i) {
    std::copy_n(g_.data() + live_[i] * C, C, gc_.data() + i * C);
  }
  const BlockWeights& bw = replacement_.model().blocks[l];
  MatMulTransposedOn(pool_, gc_.data(), n_live, bw.proj, gz_.data());
  const std::vector<float>& A = replacement_.pattern(l);
  const std::vector<const AttributionTarget*>& targets = *targets_;
  pool_.ParallelFor(H, [&](int64_t h) {
    for (int64_t i = 0; i < n_live; ++i) {
      const int q = static_cast<int>(live_[i] / B), b = static_cast<int>(live_[i] % B);
      float* dst = gv_.data() + i * C + h * D;
      std::fill(dst, dst + D, 0.0f);
      for (int p = q; p <= targets[b]->position; ++p) {
        const float a = A[(int64_t(h) * T + p) * T + q];
        if (a == 0.0f) continue;
        const float* src = gz_.data() + int64_t(slot_[int64_t(p) * B + b]) * C + h * D;
        for (int j = 0; j < D; ++j) dst[j] += a * src[j];
      }
    }
  });
  const size_t row_bytes = RowBytes(bw.qkv.type, C);
  const WeightView w_v{bw.qkv.type, static_cast<const uint8_t*>(bw.qkv.data) + row_bytes * 2 * C, C,
                       C};
  MatMulTransposedOn(pool_, gv_.data(), n_live, w_v, gz_.data());
}

// Takes gz_ (the live rows' gradient at ln_1's output); adds its frozen backward to those rows of
// g, which then stands at the stream entering block l. The rows split over the pool.
void ReplacementBackward::Ln1Backward(int l) {
  const float* gamma = replacement_.model().blocks[l].ln1_g;
  const int64_t n_live = static_cast<int64_t>(live_.size());
  const int64_t n_chunks = std::min<int64_t>(n_live, int64_t(pool_.size()) * 4);
  pool_.ParallelFor(n_chunks, [&](int64_t chunk) {
    for (int64_t i = n_live * chunk / n_chunks; i < n_live * (chunk + 1) / n_chunks; ++i) {
      const int p = static_cast<int>(live_[i] / B_);
      FrozenLayerNormBackward(gz_.data() + i * C_, gamma, replacement_.ln1_inv(l, p), C_,
                              g_.data() + live_[i] * C_);
    }
  });
}

// Takes g at the stream entering block 0; writes every target's edges from the embeddings there.
void ReplacementBackward::EmbeddingEdges() {
  for (int p = 0; p < P_ && p < T_; ++p) {
    const float* e = replacement_.embed().data() + int64_t(p) * C_;
    for (int b = 0; b < B_; ++b) {
      const float* gb = G(p, b);
      double d = 0;
      for (int i = 0; i < C_; ++i) d += double(e[i]) * gb[i];
      Row(b)[columns_.embeddings + p] = static_cast<float>(d);
    }
  }
}

}  // namespace gpt2
