#include "graph/graph.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"
#include "format/quant.h"
#include "model/backward.h"
#include "model/thread_pool.h"

namespace gpt2 {

namespace {

// What the real run leaves for the frozen model, per block: 1/sigma of ln_1's and ln_2's inputs
// [T], the attention probabilities [H, T, T]; the stream entering block 0 [T, C]; ln_f's 1/sigma.
struct Frozen {
  std::vector<std::vector<float>> inv1, inv2, probs, resid_mid, mlp_out;
  std::vector<float> embed, final_stream, inv_f, last_logits;
};

double InvSigma(const float* x, int C, double eps) {
  double mean = 0;
  for (int i = 0; i < C; ++i) mean += x[i];
  mean /= C;
  double var = 0;
  for (int i = 0; i < C; ++i) var += (x[i] - mean) * (x[i] - mean);
  return 1.0 / std::sqrt(var / C + eps);
}

// The frozen LayerNorm's backward y = (x - mean) * inv * gamma: dx = inv * (dy*gamma - mean(dy*gamma)),
// accumulated into dx [C] (gamma null: 1).
void FrozenLnBackward(const float* dy, const float* gamma, double inv, int C, float* dx) {
  double m = 0;
  for (int i = 0; i < C; ++i) m += double(dy[i]) * (gamma ? gamma[i] : 1.0f);
  m /= C;
  for (int i = 0; i < C; ++i) dx[i] += static_cast<float>(inv * (double(dy[i]) * (gamma ? gamma[i] : 1.0f) - m));
}

Frozen RunReal(Session& session, const std::vector<int>& ids) {
  const Model& model = session.model();
  const Config& c = model.config();
  const int T = static_cast<int>(ids.size()), C = c.n_embd, L = c.n_layer;
  Frozen f;
  f.inv1.resize(L);
  f.inv2.resize(L);
  f.probs.resize(L);
  f.resid_mid.resize(L);
  f.mlp_out.resize(L);
  const auto rows = [&](const Activation& a) { return std::vector<float>(a.data, a.data + int64_t(T) * C); };
  RunOptions run;
  run.observer = [&](const Activation& a) {
    switch (a.hook) {
      case Hook::kEmbed:
        f.embed = rows(a);
        break;
      case Hook::kResidPre:
        f.inv1[a.layer].resize(T);
        for (int p = 0; p < T; ++p) f.inv1[a.layer][p] = InvSigma(a.data + int64_t(p) * C, C, c.ln_eps);
        break;
      case Hook::kAttnProbs:
        f.probs[a.layer].assign(a.data, a.data + int64_t(c.n_head) * T * T);
        break;
      case Hook::kResidMid:
        f.resid_mid[a.layer] = rows(a);
        f.inv2[a.layer].resize(T);
        for (int p = 0; p < T; ++p) f.inv2[a.layer][p] = InvSigma(a.data + int64_t(p) * C, C, c.ln_eps);
        break;
      case Hook::kMlpOut:
        f.mlp_out[a.layer] = rows(a);
        break;
      case Hook::kResidPost:
        if (a.layer == L - 1) f.final_stream = rows(a);
        break;
      default:
        break;
    }
  };
  session.Reset();
  const float* logits = session.Prefill(ids.data(), T, run);
  f.last_logits.assign(logits, logits + c.n_vocab);
  f.inv_f.resize(T);
  for (int p = 0; p < T; ++p) f.inv_f[p] = InvSigma(f.final_stream.data() + int64_t(p) * C, C, c.ln_eps);
  return f;
}

// One row of the attribution: a target's layer (n_layer: a logit), position, and the gradient
// of its quantity at the stream it reads (resid_mid of its block, or the final stream), [C].
struct Target {
  int layer;
  int position;
  std::vector<float> inject;
};

// The sources of edges, grouped where they write: per block and position the active features'
// writes acts * W_dec[f] [n, C] (their column indices beside them) and the error.
struct Sources {
  std::vector<std::vector<float>> writes;  // [L * T][n, C]
  std::vector<std::vector<int>> columns;   // [L * T][n]
  std::vector<std::vector<float>> errors;  // [L][T, C]
};

class FrozenBackward {
 public:
  FrozenBackward(const Model& model, ThreadPool& pool, const Frozen& frozen, const Sources& sources,
                 int64_t n_cols, int64_t error_col, int64_t embed_col)
      : model_(model), pool_(pool), f_(frozen), s_(sources), n_cols_(n_cols), error_col_(error_col),
        embed_col_(embed_col) {}

  // rows [targets.size(), n_cols]: every edge into each target (zero where none).
  void Run(const std::vector<const Target*>& targets, float* rows) {
    const Config& c = model_.config();
    const int C = c.n_embd, L = c.n_layer, H = c.n_head, D = c.head_dim();
    const int T = static_cast<int>(f_.embed.size() / C);
    const int B = static_cast<int>(targets.size());
    int P = 0, top = -1;
    for (const Target* t : targets) {
      P = std::max(P, t->position + 1);
      top = std::max(top, std::min(t->layer, L - 1));
    }
    std::fill(rows, rows + int64_t(B) * n_cols_, 0.0f);
    // g [P][B][C]: d(quantity b)/d(the stream at position p), the stream where the loop stands.
    const int64_t R = int64_t(P) * B;
    g_.assign(R * C, 0.0f);
    gc_.resize(R * C);
    gz_.resize(R * C);
    gv_.resize(R * C);
    const auto at = [&](std::vector<float>& v, int p, int b) { return v.data() + (int64_t(p) * B + b) * C; };
    for (int b = 0; b < B; ++b) {
      if (targets[b]->layer == L) std::copy(targets[b]->inject.begin(), targets[b]->inject.end(), at(g_, targets[b]->position, b));
    }
    out_.resize(int64_t(B) * 64);
    for (int l = top; l >= 0; --l) {
      // Block l's MLP output (features, error) adds to the stream leaving the block: g is there.
      for (int p = 0; p < P && p < T; ++p) {
        const std::vector<float>& w = s_.writes[int64_t(l) * T + p];
        const std::vector<int>& col = s_.columns[int64_t(l) * T + p];
        const int n = static_cast<int>(col.size());
        if (n > 0) {
          out_.resize(int64_t(B) * n);
          MatMul(at(g_, p, 0), B, WeightView{TensorType::kF32, w.data(), n, C}, nullptr, out_.data(), 0, n);
          for (int b = 0; b < B; ++b) {
            for (int j = 0; j < n; ++j) rows[int64_t(b) * n_cols_ + col[j]] = out_[int64_t(b) * n + j];
          }
        }
        const float* e = s_.errors[l].data() + int64_t(p) * C;
        for (int b = 0; b < B; ++b) {
          const float* gb = at(g_, p, b);
          double d = 0;
          for (int i = 0; i < C; ++i) d += double(e[i]) * gb[i];
          rows[int64_t(b) * n_cols_ + error_col_ + int64_t(l) * T + p] = static_cast<float>(d);
        }
      }
      // The MLP passes g unchanged (its output is constant); block l's features read here.
      for (int b = 0; b < B; ++b) {
        if (targets[b]->layer == l) {
          float* gb = at(g_, targets[b]->position, b);
          for (int i = 0; i < C; ++i) gb[i] += targets[b]->inject[i];
        }
      }
      // Attention with frozen probabilities: z[p] = sum_q A[p, q] v[q], v = ln_1(x) W_v + b.
      // Only the live rows go through the products: row (p, b) is zero unless target b reads at
      // or above this block and p <= its position (causal attention carries nothing back to
      // later positions). Batches mix positions and blocks, so the dense [P, B] rows were half
      // zeros on a 16-token prompt (BENCHMARKS.md, "Attribution graphs").
      live_.clear();
      slot_.assign(R, -1);
      for (int p = 0; p < P; ++p) {
        for (int b = 0; b < B; ++b) {
          if (targets[b]->layer >= l && p <= targets[b]->position) {
            slot_[int64_t(p) * B + b] = static_cast<int>(live_.size());
            live_.push_back(int64_t(p) * B + b);
          }
        }
      }
      const int64_t n_live = static_cast<int64_t>(live_.size());
      if (n_live == 0) continue;
      for (int64_t i = 0; i < n_live; ++i) std::copy_n(g_.data() + live_[i] * C, C, gc_.data() + i * C);
      const BlockWeights& bw = model_.blocks[l];
      MatMulTransposedOn(pool_, gc_.data(), n_live, bw.proj, gz_.data());
      const std::vector<float>& A = f_.probs[l];
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
      const WeightView wv{bw.qkv.type, static_cast<const uint8_t*>(bw.qkv.data) + row_bytes * 2 * C, C, C};
      MatMulTransposedOn(pool_, gv_.data(), n_live, wv, gz_.data());  // gz_ now d/d(ln_1 output)
      for (int64_t i = 0; i < n_live; ++i) {
        const int p = static_cast<int>(live_[i] / B);
        FrozenLnBackward(gz_.data() + i * C, bw.ln1_g, f_.inv1[l][p], C, g_.data() + live_[i] * C);
      }
    }
    for (int p = 0; p < P && p < T; ++p) {
      const float* e = f_.embed.data() + int64_t(p) * C;
      for (int b = 0; b < B; ++b) {
        const float* gb = at(g_, p, b);
        double d = 0;
        for (int i = 0; i < C; ++i) d += double(e[i]) * gb[i];
        rows[int64_t(b) * n_cols_ + embed_col_ + p] = static_cast<float>(d);
      }
    }
  }

 private:
  const Model& model_;
  ThreadPool& pool_;
  const Frozen& f_;
  const Sources& s_;
  int64_t n_cols_, error_col_, embed_col_;
  std::vector<float> g_, gc_, gz_, gv_, out_;  // [P * B, C]; gc_, gz_, gv_ live rows first
  std::vector<int64_t> live_;                   // the live rows' p * B + b
  std::vector<int> slot_;                       // [P * B]: row -> its place among the live, or -1
};

struct Active {
  int layer, position, feature;
  float act;
};

// Targets per backward pass: rows [P x batch, C] keep the matmuls' weights read once for many
// rows, at 4 x 17 x 64 x 768 floats of buffers for GPT-2 small.
constexpr int kBatch = 64;
// And at most this many (block, position) rows through the blocks in one pass, summed over its
// targets (a target at block l and position p runs (l + 1) x (p + 1)): the page's worker reads a
// cancel only between passes, and 64 targets of GPT-2 small's top blocks took 750 ms a pass in
// wasm (BENCHMARKS.md, "Attribution graphs").
constexpr int64_t kBatchWork = 1024;
// circuit-tracer's attribute(): batch_size 512, update_interval 4 decide how many features it
// ranks between updates of the partial influences (the selection under max_feature_nodes).
constexpr int kRankQueue = 4 * 512;

// circuit-tracer's compute_partial_influences: rows [n_rows, n_cols] (row r is node node_of[r]),
// the logits' probabilities on the last columns.
std::vector<double> PartialInfluences(const std::vector<float>& rows, int64_t n_rows, int64_t n_cols,
                                      const std::vector<int64_t>& node_of, const std::vector<float>& logit_p) {
  std::vector<double> norm(n_rows, 0.0);
  for (int64_t r = 0; r < n_rows; ++r) {
    double s = 0;
    for (int64_t j = 0; j < n_cols; ++j) s += std::fabs(rows[r * n_cols + j]);
    norm[r] = 1.0 / std::max(s, 1e-8);
  }
  std::vector<double> influence(n_cols, 0.0), prod(n_cols, 0.0), next(n_cols);
  for (size_t i = 0; i < logit_p.size(); ++i) prod[n_cols - logit_p.size() + i] = logit_p[i];
  for (int iter = 0; iter < 128; ++iter) {
    std::fill(next.begin(), next.end(), 0.0);
    bool any = false;
    for (int64_t r = 0; r < n_rows; ++r) {
      const double w = prod[node_of[r]] * norm[r];
      if (w == 0) continue;
      for (int64_t j = 0; j < n_cols; ++j) next[j] += w * std::fabs(rows[r * n_cols + j]);
    }
    for (int64_t j = 0; j < n_cols; ++j) any = any || next[j] != 0;
    if (!any) return influence;
    for (int64_t j = 0; j < n_cols; ++j) influence[j] += next[j];
    prod.swap(next);
  }
  throw Error("graph: partial influences did not converge");
}

}  // namespace

// Everything a build carries between its steps: the real run, the sources, the rows so far.
struct AttributionGraphBuild::State {
  State(const Model& m, ThreadPool& p, const TranscoderSet& t, const std::vector<int>& i, const GraphOptions& o,
        Frozen frozen)
      : model(m), pool(p), tcs(t), ids(i), options(o), f(std::move(frozen)) {}
  const Model& model;
  ThreadPool& pool;
  const TranscoderSet& tcs;
  std::vector<int> ids;
  GraphOptions options;
  Frozen f;
  std::vector<Active> active;
  Sources src;
  int64_t n_active = 0, error_col = 0, embed_col = 0, n_cols = 0;
  std::vector<int> logit_ids;
  std::vector<float> logit_p;
  int n_logits = 0, max_features = 0, total_rows = 0;
  std::unique_ptr<FrozenBackward> backward;  // reads f and src: made once they are whole
  int blocks_encoded = 0;                    // EncodeBlock's, one per Continue()
  bool prepared = false;                     // Prepare() has run
  std::vector<Target> logit_targets;         // run by the Continue() after Prepare()
  bool logits_run = false;
  std::vector<float> rows;
  std::vector<int64_t> node_of;
  std::vector<char> visited;
  int st = 0;                  // rows done
  std::vector<int64_t> order;  // the current queue of features, in the order run
  size_t i0 = 0;               // the queue's next batch
};

AttributionGraphBuild::AttributionGraphBuild(Session& session, const TranscoderSet& tcs, const std::vector<int>& ids,
                                             const GraphOptions& options) {
  const Model& model = session.model();
  const Config& c = model.config();
  const int T = static_cast<int>(ids.size()), L = c.n_layer;
  if (T < 1) throw Error("graph: no tokens");
  if (T > c.n_ctx) throw Error("graph: " + std::to_string(T) + " tokens, past the context of " + std::to_string(c.n_ctx));
  if (tcs.n_layer() != L) throw Error("graph: the transcoders were bound to another model");
  for (int t : options.targets) {
    if (t < 0 || t >= c.n_vocab) throw Error("graph: target " + std::to_string(t) + " is out of the vocabulary");
  }
  s_ = std::make_unique<State>(model, session.pool(), tcs, ids, options, RunReal(session, ids));
  Sources& src = s_->src;
  src.writes.resize(int64_t(L) * T);
  src.columns.resize(int64_t(L) * T);
  src.errors.resize(L);
}

// Block l's features and error from the real stream: the transcoder's activations at every
// position, each active feature's write (a W_dec[f]) and the error (the MLP's output less the
// transcoder's). Features at position 0 (the BOS) are left out, as circuit-tracer does.
void AttributionGraphBuild::EncodeBlock(int l) {
  State& s = *s_;
  const Frozen& f = s.f;
  const int T = static_cast<int>(s.ids.size()), C = s.model.config().n_embd;
  std::vector<Active>& active = s.active;
  Sources& src = s.src;
  std::vector<float> row(C);
  src.errors[l] = f.mlp_out[l];
  const Sae* tc = s.tcs.block(l);
  if (tc == nullptr) return;
  const int S = tc->d_sae();
  std::vector<float> acts(int64_t(T) * S);
  SaeScratch scratch;
  tc->Encode(f.resid_mid[l].data(), T, acts.data(), nullptr, scratch);
  for (int p = 0; p < T; ++p) {
    float* err = src.errors[l].data() + int64_t(p) * C;
    for (int i = 0; i < C; ++i) err[i] -= tc->decoder_bias()[i];
    for (int j = 0; j < S; ++j) {
      const float a = acts[int64_t(p) * S + j];
      if (!(a > 0)) continue;
      tc->DecoderRowInto(j, row.data());
      for (int i = 0; i < C; ++i) err[i] -= a * row[i];
      if (p == 0) continue;
      std::vector<float>& w = src.writes[int64_t(l) * T + p];
      const size_t at = w.size();
      w.resize(at + C);
      for (int i = 0; i < C; ++i) w[at + i] = a * row[i];
      src.columns[int64_t(l) * T + p].push_back(static_cast<int>(active.size()));
      active.push_back(Active{l, p, j, a});
    }
  }
}

// Once every block is encoded: the columns, the logits to explain and their rows' targets, the
// rows' storage.
void AttributionGraphBuild::Prepare() {
  State& s = *s_;
  const Model& model = s.model;
  const Config& c = model.config();
  const Frozen& f = s.f;
  const GraphOptions& options = s.options;
  const int T = static_cast<int>(s.ids.size()), C = c.n_embd, L = c.n_layer;
  const std::vector<Active>& active = s.active;
  std::vector<float> row(C);
  const int64_t n_active = s.n_active = static_cast<int64_t>(active.size());

  // Logits: circuit-tracer's compute_salient_logits, or the given targets.
  std::vector<double> probs(f.last_logits.begin(), f.last_logits.end());
  const double mx = *std::max_element(probs.begin(), probs.end());
  double z = 0;
  for (double& p : probs) z += (p = std::exp(p - mx));
  for (double& p : probs) p /= z;
  std::vector<int>& logit_ids = s.logit_ids;
  logit_ids = options.targets;
  if (logit_ids.empty()) {
    std::vector<int> order(c.n_vocab);
    std::iota(order.begin(), order.end(), 0);
    const int k = std::min(options.max_n_logits, c.n_vocab);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); });
    double cum = 0;
    for (int i = 0; i < k; ++i) {
      logit_ids.push_back(order[i]);
      cum += probs[order[i]];
      if (cum >= options.desired_logit_prob) break;
    }
  }
  const int n_logits = s.n_logits = static_cast<int>(logit_ids.size());
  std::vector<float>& logit_p = s.logit_p;
  for (int t : logit_ids) logit_p.push_back(static_cast<float>(probs[t]));

  // Columns: active features, errors [L][T], embeddings [T], logits.
  const int64_t error_col = s.error_col = n_active, embed_col = s.embed_col = n_active + int64_t(L) * T;
  const int64_t n_cols = s.n_cols = embed_col + T + n_logits;
  s.backward = std::make_unique<FrozenBackward>(model, s.pool, f, s.src, n_cols, error_col, embed_col);

  // Logit targets: ln_f's frozen backward of W_U[tok] - mean_v W_U[v].
  std::vector<double> mean_u(C, 0.0);
  const size_t out_bytes = RowBytes(model.output.type, C);
  for (int v = 0; v < c.n_vocab; ++v) {
    DequantizeRow(model.output.type, static_cast<const uint8_t*>(model.output.data) + out_bytes * v, row.data(), C);
    for (int i = 0; i < C; ++i) mean_u[i] += row[i];
  }
  for (double& m : mean_u) m /= c.n_vocab;
  std::vector<Target>& logit_targets = s.logit_targets;
  for (int t : logit_ids) {
    DequantizeRow(model.output.type, static_cast<const uint8_t*>(model.output.data) + out_bytes * t, row.data(), C);
    for (int i = 0; i < C; ++i) row[i] = static_cast<float>(row[i] - mean_u[i]);
    Target target{L, T - 1, std::vector<float>(C, 0.0f)};
    FrozenLnBackward(row.data(), model.ln_f_g, f.inv_f[T - 1], C, target.inject.data());
    logit_targets.push_back(std::move(target));
  }
  s.max_features = static_cast<int>(
      options.max_feature_nodes < 0 ? n_active : std::min<int64_t>(options.max_feature_nodes, n_active));
  s.total_rows = n_logits + s.max_features;
  s.rows.assign(int64_t(s.total_rows) * n_cols, 0.0f);
  s.node_of.assign(s.total_rows, 0);
  s.visited.assign(n_active, 0);
}

AttributionGraphBuild::~AttributionGraphBuild() = default;

int AttributionGraphBuild::rows_done() const { return s_->st; }
int AttributionGraphBuild::rows_total() const { return s_->total_rows; }
bool AttributionGraphBuild::done() const {
  return s_->logits_run && s_->st - s_->n_logits >= s_->max_features;
}

GraphProgress AttributionGraphBuild::progress() const {
  const State& s = *s_;
  if (!s.prepared) return {true, s.blocks_encoded, s.model.config().n_layer, false};
  return {false, s.st, s.total_rows, done()};
}

void AttributionGraphBuild::Continue() {
  if (done()) return;
  State& s = *s_;
  if (!s.prepared) {
    if (s.blocks_encoded < s.model.config().n_layer) {
      EncodeBlock(s.blocks_encoded++);
    } else {
      Prepare();
      s.prepared = true;
    }
    return;
  }
  // The logits' rows first, a pass of their own (the constructor's work is long enough already).
  if (!s.logits_run) {
    s.logits_run = true;
    std::vector<const Target*> batch;
    for (const Target& t : s.logit_targets) batch.push_back(&t);
    s.backward->Run(batch, s.rows.data());
    for (int i = 0; i < s.n_logits; ++i) s.node_of[i] = s.embed_col + int64_t(s.ids.size()) + i;
    s.st = s.n_logits;
    return;
  }
  const int C = s.model.config().n_embd;
  const int64_t n_active = s.n_active, n_cols = s.n_cols;
  const int n_logits = s.n_logits, max_features = s.max_features;
  const std::vector<Active>& active = s.active;
  std::vector<float> row(C);
  // Features: in circuit-tracer's order of discovery (all at once, or by partial influence); a
  // new queue when the last one is used up.
  if (s.i0 >= s.order.size()) {
    std::vector<int64_t> pending;
    if (max_features == n_active) {
      pending.resize(n_active);
      std::iota(pending.begin(), pending.end(), 0);
    } else {
      const std::vector<double> infl = PartialInfluences(s.rows, s.st, n_cols, s.node_of, s.logit_p);
      std::vector<int64_t> rank(n_active);
      std::iota(rank.begin(), rank.end(), 0);
      std::stable_sort(rank.begin(), rank.end(), [&](int64_t a, int64_t b) { return infl[a] > infl[b]; });
      const int queue = std::min(kRankQueue, max_features - (s.st - n_logits));
      for (int64_t i : rank) {
        if (static_cast<int>(pending.size()) == queue) break;
        if (!s.visited[i]) pending.push_back(i);
      }
    }
    // The queue's rows in order of block, then position: each pass then runs only the blocks and
    // positions its targets need.
    s.order = pending;
    std::stable_sort(s.order.begin(), s.order.end(), [&](int64_t a, int64_t b) {
      return active[a].layer != active[b].layer ? active[a].layer > active[b].layer
                                                : active[a].position > active[b].position;
    });
    s.i0 = 0;
  }
  const std::vector<int64_t>& order = s.order;
  const size_t i0 = s.i0;
  size_t n = 0;
  for (int64_t work = 0; n < std::min<size_t>(kBatch, order.size() - i0); ++n) {
    const Active& a = active[order[i0 + n]];
    work += int64_t(a.layer + 1) * (a.position + 1);
    if (n > 0 && work > kBatchWork) break;
  }
  std::vector<Target> targets;
  for (size_t i = 0; i < n; ++i) {
    const Active& a = active[order[i0 + i]];
    const Sae* tc = s.tcs.block(a.layer);
    tc->EncoderRowInto(a.feature, row.data());
    Target t{a.layer, a.position, std::vector<float>(C, 0.0f)};
    FrozenLnBackward(row.data(), nullptr, s.f.inv2[a.layer][a.position], C, t.inject.data());
    targets.push_back(std::move(t));
  }
  std::vector<const Target*> batch;
  for (const Target& t : targets) batch.push_back(&t);
  s.backward->Run(batch, s.rows.data() + int64_t(s.st) * n_cols);
  for (size_t i = 0; i < n; ++i) {
    s.node_of[s.st + i] = order[i0 + i];
    s.visited[order[i0 + i]] = 1;
  }
  s.st += static_cast<int>(n);
  s.i0 += n;
}

AttributionGraph AttributionGraphBuild::Finish() {
  if (!done()) throw Error("graph: the build is not finished");
  State& s = *s_;
  const Config& c = s.model.config();
  const int T = static_cast<int>(s.ids.size()), L = c.n_layer;
  const int64_t n_active = s.n_active, n_cols = s.n_cols, error_col = s.error_col, embed_col = s.embed_col;
  const int n_logits = s.n_logits, total_rows = s.total_rows;
  const std::vector<Active>& active = s.active;
  const std::vector<char>& visited = s.visited;
  const std::vector<int>& ids = s.ids;
  const std::vector<int>& logit_ids = s.logit_ids;
  const std::vector<float>& logit_p = s.logit_p;
  const std::vector<int64_t>& node_of = s.node_of;
  const std::vector<float>& rows = s.rows;
  // The graph over the selected features (in active order), as circuit-tracer packs it.
  AttributionGraph g;
  g.ids = ids;
  g.n_layer = L;
  g.n_pos = T;
  g.n_logits = n_logits;
  g.n_active = n_active;
  std::vector<int64_t> col_of_node;  // the graph's node i -> column of `rows`
  for (int64_t i = 0; i < n_active; ++i) {
    if (!visited[i]) continue;
    const Active& a = active[i];
    g.nodes.push_back(GraphNode{GraphNodeKind::kFeature, a.layer, a.position, a.feature, a.act});
    col_of_node.push_back(i);
  }
  g.n_features = static_cast<int>(g.nodes.size());
  for (int l = 0; l < L; ++l) {
    for (int p = 0; p < T; ++p) {
      g.nodes.push_back(GraphNode{GraphNodeKind::kError, l, p, -1, 0.0f});
      col_of_node.push_back(error_col + int64_t(l) * T + p);
    }
  }
  for (int p = 0; p < T; ++p) {
    g.nodes.push_back(GraphNode{GraphNodeKind::kEmbedding, -1, p, ids[p], 0.0f});
    col_of_node.push_back(embed_col + p);
  }
  for (int i = 0; i < n_logits; ++i) {
    g.nodes.push_back(GraphNode{GraphNodeKind::kLogit, L, T - 1, logit_ids[i], logit_p[i]});
    col_of_node.push_back(embed_col + T + i);
  }
  const int N = g.size();
  std::vector<int64_t> row_of_column(n_cols, -1);
  for (int r = 0; r < total_rows; ++r) row_of_column[node_of[r]] = r;
  g.adjacency.assign(int64_t(N) * N, 0.0f);
  for (int t = 0; t < N; ++t) {
    const int64_t r = row_of_column[col_of_node[t]];
    if (r < 0) continue;  // errors and embeddings have no incoming edges
    for (int s = 0; s < N; ++s) g.adjacency[int64_t(t) * N + s] = rows[r * n_cols + col_of_node[s]];
  }
  return g;
}

AttributionGraph BuildAttributionGraph(Session& session, const TranscoderSet& tcs, const std::vector<int>& ids,
                                       const GraphOptions& options) {
  AttributionGraphBuild build(session, tcs, ids, options);
  const auto report = [&]() {
    const GraphProgress p = build.progress();
    if (options.progress && !p.encoding && !options.progress(p.done, p.total)) throw Error("graph: cancelled");
  };
  while (!build.done()) {
    build.Continue();
    report();
  }
  return build.Finish();
}

namespace {

// circuit-tracer's normalize_matrix: |A| with each row divided by its sum (at least 1e-10).
std::vector<double> Normalized(const std::vector<float>& a, int N) {
  std::vector<double> m(a.size());
  for (int t = 0; t < N; ++t) {
    double s = 0;
    for (int j = 0; j < N; ++j) s += std::fabs(a[int64_t(t) * N + j]);
    s = std::max(s, 1e-10);
    for (int j = 0; j < N; ++j) m[int64_t(t) * N + j] = std::fabs(a[int64_t(t) * N + j]) / s;
  }
  return m;
}

// circuit-tracer's compute_influence: w A + w A^2 + ... until it vanishes (A is a DAG's).
std::vector<double> Influence(const std::vector<double>& m, const std::vector<double>& w, int N) {
  std::vector<double> cur(N, 0.0), infl(N, 0.0), next(N);
  cur = w;
  for (int iter = 0; iter <= 1000; ++iter) {
    std::fill(next.begin(), next.end(), 0.0);
    for (int t = 0; t < N; ++t) {
      if (cur[t] == 0) continue;
      for (int j = 0; j < N; ++j) next[j] += cur[t] * m[int64_t(t) * N + j];
    }
    bool any = false;
    for (int j = 0; j < N; ++j) any = any || next[j] != 0;
    if (!any) return infl;
    for (int j = 0; j < N; ++j) infl[j] += next[j];
    cur.swap(next);
  }
  throw Error("graph: influence did not converge");
}

// circuit-tracer's find_threshold: the score where the descending cumulative share first reaches
// `threshold` (torch.searchsorted's left side), the last one past the end.
double FindThreshold(std::vector<double> scores, double threshold) {
  std::sort(scores.begin(), scores.end(), std::greater<double>());
  double total = 0;
  for (double s : scores) total += s;
  double cum = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    cum += scores[i];
    if (cum / total >= threshold) return scores[i];
  }
  return scores.back();
}

}  // namespace

PrunedGraph PruneAttributionGraph(const AttributionGraph& g, double node_threshold, double edge_threshold) {
  if (!(node_threshold >= 0 && node_threshold <= 1) || !(edge_threshold >= 0 && edge_threshold <= 1)) {
    throw Error("graph: thresholds must be between 0 and 1");
  }
  const int N = g.size(), n_feat = g.n_features;
  const int keep_from = g.embedding_begin();  // embeddings and logits are always kept
  std::vector<double> w(N, 0.0);
  for (int i = 0; i < g.n_logits; ++i) w[g.logit_begin() + i] = g.nodes[g.logit_begin() + i].activation;
  PrunedGraph out;
  const std::vector<double> m = Normalized(g.adjacency, N);
  out.influence = Influence(m, w, N);
  const double node_cut = FindThreshold(out.influence, node_threshold);
  out.node_mask.assign(N, 0);
  for (int i = 0; i < N; ++i) out.node_mask[i] = out.influence[i] >= node_cut || i >= keep_from;

  std::vector<float> pruned(g.adjacency);
  for (int t = 0; t < N; ++t) {
    for (int s = 0; s < N; ++s) {
      if (!out.node_mask[t] || !out.node_mask[s]) pruned[int64_t(t) * N + s] = 0.0f;
    }
  }
  const std::vector<double> pm = Normalized(pruned, N);
  std::vector<double> pinfl = Influence(pm, w, N);
  for (int i = 0; i < N; ++i) pinfl[i] += w[i];
  std::vector<double> edge_scores(int64_t(N) * N);
  for (int t = 0; t < N; ++t) {
    for (int s = 0; s < N; ++s) edge_scores[int64_t(t) * N + s] = pm[int64_t(t) * N + s] * pinfl[t];
  }
  const double edge_cut = FindThreshold(edge_scores, edge_threshold);
  out.edge_mask.assign(int64_t(N) * N, 0);
  for (int64_t i = 0; i < int64_t(N) * N; ++i) out.edge_mask[i] = edge_scores[i] >= edge_cut;

  // Features and errors need an edge out, features one in; repeated until nothing changes.
  for (bool first = true;; first = false) {
    const std::vector<char> old = out.node_mask;
    if (!first) {
      for (int t = 0; t < N; ++t) {
        for (int s = 0; s < N; ++s) {
          if (!out.node_mask[t] || !out.node_mask[s]) out.edge_mask[int64_t(t) * N + s] = 0;
        }
      }
    }
    for (int s = 0; s < keep_from; ++s) {
      bool out_edge = false;
      for (int t = 0; t < N && !out_edge; ++t) out_edge = out.edge_mask[int64_t(t) * N + s] != 0;
      out.node_mask[s] = out.node_mask[s] && out_edge;
    }
    for (int t = 0; t < n_feat; ++t) {
      bool in_edge = false;
      for (int s = 0; s < N && !in_edge; ++s) in_edge = out.edge_mask[int64_t(t) * N + s] != 0;
      out.node_mask[t] = out.node_mask[t] && in_edge;
    }
    if (old == out.node_mask) break;
  }

  // cumulative_scores: each node's share of the total influence, summed down the descending order.
  std::vector<int> order(N);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return out.influence[a] > out.influence[b]; });
  double total = 0;
  for (double x : out.influence) total += x;
  out.cumulative.assign(N, 0.0);
  double cum = 0;
  for (int i : order) {
    cum += out.influence[i];
    out.cumulative[i] = total > 0 ? cum / total : 0;
  }

  // circuit-tracer's compute_graph_scores (read again in its graph.py on 2026-12-05, as were the
  // pruning and find_threshold above): replacement = embeddings' influence / (embeddings' +
  // errors'); completeness = the share of each node's normalised inputs not from errors, weighted
  // by its influence plus its logit weight.
  double token_infl = 0, error_infl = 0;
  for (int i = g.error_begin(); i < g.embedding_begin(); ++i) error_infl += out.influence[i];
  for (int i = g.embedding_begin(); i < g.logit_begin(); ++i) token_infl += out.influence[i];
  out.replacement_score = token_infl + error_infl > 0 ? token_infl / (token_infl + error_infl) : 0;
  double num = 0, den = 0;
  for (int t = 0; t < N; ++t) {
    double from_errors = 0;
    for (int s = g.error_begin(); s < g.embedding_begin(); ++s) from_errors += m[int64_t(t) * N + s];
    const double weight = out.influence[t] + w[t];
    num += (1 - from_errors) * weight;
    den += weight;
  }
  out.completeness_score = den > 0 ? num / den : 0;
  return out;
}

double PredictedLogitChange(const AttributionGraph& g, const std::vector<int>& chosen, float value, int logit) {
  if (logit < g.logit_begin() || logit >= g.size()) {
    throw Error("graph: node " + std::to_string(logit) + " is not a logit node (" + std::to_string(g.logit_begin()) +
                ".." + std::to_string(g.size() - 1) + ")");
  }
  const int nf = g.n_features;
  std::vector<char> fixed(nf, 0);
  for (int i : chosen) {
    if (i < 0 || i >= nf) {
      throw Error("graph: node " + std::to_string(i) + " is not a feature node (0.." + std::to_string(nf - 1) + ")");
    }
    fixed[i] = 1;
  }
  // Feature nodes are in block order and an edge only runs from a lower block to a higher one,
  // so one pass in node order sees every source's change before its targets.
  std::vector<double> delta(nf, 0.0);
  const auto carried = [&](int t) {
    double d = 0;
    for (int s = 0; s < nf; ++s) {
      if (delta[s] != 0) d += double(g.edge(t, s)) * delta[s] / g.nodes[s].activation;
    }
    return d;
  };
  for (int t = 0; t < nf; ++t) delta[t] = fixed[t] ? double(value) - g.nodes[t].activation : carried(t);
  return carried(logit);
}

}  // namespace gpt2
