// The build of graph/attribute.h: the phases of circuit-tracer's attribute(), one step per
// Continue(), and the graph packed at the end.
#include "graph/attribute.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "base/error.h"

namespace gpt2 {

namespace {

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

// The checks, before the real run.
const std::vector<int>& Checked(const Model& model, const TranscoderSet& tcs,
                                const std::vector<int>& ids, const GraphOptions& options) {
  const Config& c = model.config();
  const int T = static_cast<int>(ids.size());
  if (T < 1) throw Error("graph: no tokens");
  if (T > c.n_ctx) {
    throw Error("graph: " + std::to_string(T) + " tokens, past the context of " +
                std::to_string(c.n_ctx));
  }
  if (tcs.n_layer() != c.n_layer) throw Error("graph: the transcoders were bound to another model");
  for (int t : options.targets) {
    if (t < 0 || t >= c.n_vocab) {
      throw Error("graph: target " + std::to_string(t) + " is out of the vocabulary");
    }
  }
  return ids;
}

// circuit-tracer's compute_partial_influences: rows [n_rows, n_cols] (row r is node node_of[r]),
// the logits' probabilities on the last columns.
std::vector<double> PartialInfluences(const float* rows, int64_t n_rows, int64_t n_cols,
                                      const std::vector<int64_t>& node_of,
                                      const std::vector<float>& logit_p) {
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

const char* AttributionGraphBuild::PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kEncoding:
      return "encoding";
    case Phase::kLogitRows:
      return "logit rows";
    case Phase::kFeatureRows:
      return "feature rows";
    case Phase::kDone:
      return "done";
  }
  return "";
}

AttributionGraphBuild::AttributionGraphBuild(Session& session, const TranscoderSet& transcoders,
                                             const std::vector<int>& ids,
                                             const GraphOptions& options)
    : model_(session.model()),
      pool_(session.pool()),
      ids_(Checked(session.model(), transcoders, ids, options)),
      options_(options),
      replacement_(session, transcoders, ids) {}

AttributionGraphBuild::~AttributionGraphBuild() = default;

void AttributionGraphBuild::Continue() {
  switch (phase_) {
    case Phase::kEncoding:
      if (blocks_encoded_ < model_.config().n_layer) {
        replacement_.EncodeBlock(blocks_encoded_++);
      } else {
        LayOutColumns();
        phase_ = Phase::kLogitRows;
      }
      return;
    case Phase::kLogitRows:
      RunLogitRows();
      phase_ = rows_done_ < rows_total_ ? Phase::kFeatureRows : Phase::kDone;
      return;
    case Phase::kFeatureRows:
      RunFeatureRows();
      if (rows_done_ >= rows_total_) phase_ = Phase::kDone;
      return;
    case Phase::kDone:
      return;
  }
}

// Once every block is encoded: the logits to explain, the columns, the logits' targets, the
// rows' storage.
void AttributionGraphBuild::LayOutColumns() {
  const Config& c = model_.config();
  const int T = static_cast<int>(ids_.size()), L = c.n_layer;
  const int64_t n_active = static_cast<int64_t>(replacement_.features().size());

  // Logits: circuit-tracer's compute_salient_logits, or the given targets.
  const std::vector<float>& last_logits = replacement_.last_logits();
  std::vector<double> probs(last_logits.begin(), last_logits.end());
  const double mx = *std::max_element(probs.begin(), probs.end());
  double z = 0;
  for (double& p : probs) z += (p = std::exp(p - mx));
  for (double& p : probs) p /= z;
  logit_ids_ = options_.targets;
  if (logit_ids_.empty()) {
    std::vector<int> order(c.n_vocab);
    std::iota(order.begin(), order.end(), 0);
    const int k = std::min(options_.max_n_logits, c.n_vocab);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
      return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
    });
    double cum = 0;
    for (int i = 0; i < k; ++i) {
      logit_ids_.push_back(order[i]);
      cum += probs[order[i]];
      if (cum >= options_.desired_logit_prob) break;
    }
  }
  const int n_logits = static_cast<int>(logit_ids_.size());
  for (int t : logit_ids_) logit_probs_.push_back(static_cast<float>(probs[t]));

  // Columns: active features, errors [L][T], embeddings [T], logits.
  columns_.errors = n_active;
  columns_.embeddings = n_active + int64_t(L) * T;
  columns_.size = columns_.embeddings + T + n_logits;
  backward_ = std::make_unique<ReplacementBackward>(replacement_, pool_, columns_);
  logit_targets_ = replacement_.LogitTargets(logit_ids_);

  feature_rows_ = static_cast<int>(options_.max_feature_nodes < 0
                                       ? n_active
                                       : std::min<int64_t>(options_.max_feature_nodes, n_active));
  rows_total_ = n_logits + feature_rows_;
  rows_.reset(new float[int64_t(rows_total_) * columns_.size]);
  column_of_row_.assign(rows_total_, 0);
  attributed_.assign(n_active, 0);
}

// The logits' rows first, a pass of their own (the constructor's work is long enough already).
void AttributionGraphBuild::RunLogitRows() {
  std::vector<const AttributionTarget*> batch;
  for (const AttributionTarget& t : logit_targets_) batch.push_back(&t);
  backward_->Run(batch, rows_.get());
  const int n_logits = static_cast<int>(logit_ids_.size());
  for (int i = 0; i < n_logits; ++i)
    column_of_row_[i] = columns_.embeddings + int64_t(ids_.size()) + i;
  rows_done_ = n_logits;
}

// The next features to attribute, in circuit-tracer's order of discovery (all at once, or the
// most influential not yet run, by partial influence on the logits through the rows so far).
void AttributionGraphBuild::RankQueue() {
  const std::vector<ActiveFeature>& active = replacement_.features();
  const int64_t n_active = static_cast<int64_t>(active.size());
  const int n_logits = static_cast<int>(logit_ids_.size());
  std::vector<int64_t> pending;
  if (feature_rows_ == n_active) {
    pending.resize(n_active);
    std::iota(pending.begin(), pending.end(), 0);
  } else {
    const std::vector<double> infl =
        PartialInfluences(rows_.get(), rows_done_, columns_.size, column_of_row_, logit_probs_);
    std::vector<int64_t> rank(n_active);
    std::iota(rank.begin(), rank.end(), 0);
    std::stable_sort(rank.begin(), rank.end(),
                     [&](int64_t a, int64_t b) { return infl[a] > infl[b]; });
    const int queue = std::min(kRankQueue, feature_rows_ - (rows_done_ - n_logits));
    for (int64_t i : rank) {
      if (static_cast<int>(pending.size()) == queue) break;
      if (!attributed_[i]) pending.push_back(i);
    }
  }
  // The queue's rows in order of block, then position: each pass then runs only the blocks and
  // positions its targets need.
  queue_ = pending;
  std::stable_sort(queue_.begin(), queue_.end(), [&](int64_t a, int64_t b) {
    return active[a].layer != active[b].layer ? active[a].layer > active[b].layer
                                              : active[a].position > active[b].position;
  });
  next_in_queue_ = 0;
}

// One backward pass over the queue's next features (a new queue when the last one is used up),
// at most kBatch of them and about kBatchWork rows through the blocks.
void AttributionGraphBuild::RunFeatureRows() {
  if (next_in_queue_ >= queue_.size()) RankQueue();
  const std::vector<ActiveFeature>& active = replacement_.features();
  const size_t first = next_in_queue_;
  size_t n = 0;
  for (int64_t work = 0; n < std::min<size_t>(kBatch, queue_.size() - first); ++n) {
    const ActiveFeature& a = active[queue_[first + n]];
    work += int64_t(a.layer + 1) * (a.position + 1);
    if (n > 0 && work > kBatchWork) break;
  }
  std::vector<AttributionTarget> targets;
  for (size_t i = 0; i < n; ++i)
    targets.push_back(replacement_.FeatureTarget(active[queue_[first + i]]));
  std::vector<const AttributionTarget*> batch;
  for (const AttributionTarget& t : targets) batch.push_back(&t);
  backward_->Run(batch, rows_.get() + int64_t(rows_done_) * columns_.size);
  for (size_t i = 0; i < n; ++i) {
    column_of_row_[rows_done_ + i] = queue_[first + i];
    attributed_[queue_[first + i]] = 1;
  }
  rows_done_ += static_cast<int>(n);
  next_in_queue_ += n;
}

AttributionGraph AttributionGraphBuild::Finish() {
  if (!done()) throw Error("graph: the build is not finished");
  const int T = static_cast<int>(ids_.size()), L = model_.config().n_layer;
  const std::vector<ActiveFeature>& active = replacement_.features();
  const int64_t n_active = static_cast<int64_t>(active.size());
  const int n_logits = static_cast<int>(logit_ids_.size());
  // The graph over the attributed features (in active order), as circuit-tracer packs it.
  AttributionGraph g;
  g.ids = ids_;
  g.n_layer = L;
  g.n_pos = T;
  g.n_logits = n_logits;
  g.n_active = n_active;
  std::vector<int64_t> column_of_node;  // the graph's node i -> its column of rows_
  for (int64_t i = 0; i < n_active; ++i) {
    if (!attributed_[i]) continue;
    const ActiveFeature& a = active[i];
    g.nodes.push_back(
        GraphNode{GraphNodeKind::kFeature, a.layer, a.position, a.feature, a.activation});
    column_of_node.push_back(i);
  }
  g.n_features = static_cast<int>(g.nodes.size());
  for (int l = 0; l < L; ++l) {
    for (int p = 0; p < T; ++p) {
      g.nodes.push_back(GraphNode{GraphNodeKind::kError, l, p, -1, 0.0f});
      column_of_node.push_back(columns_.errors + int64_t(l) * T + p);
    }
  }
  for (int p = 0; p < T; ++p) {
    g.nodes.push_back(GraphNode{GraphNodeKind::kEmbedding, -1, p, ids_[p], 0.0f});
    column_of_node.push_back(columns_.embeddings + p);
  }
  for (int i = 0; i < n_logits; ++i) {
    g.nodes.push_back(GraphNode{GraphNodeKind::kLogit, L, T - 1, logit_ids_[i], logit_probs_[i]});
    column_of_node.push_back(columns_.embeddings + T + i);
  }
  const int N = g.size();
  std::vector<int64_t> row_of_column(columns_.size, -1);
  for (int r = 0; r < rows_total_; ++r) row_of_column[column_of_row_[r]] = r;
  g.adjacency.assign(int64_t(N) * N, 0.0f);
  for (int t = 0; t < N; ++t) {
    const int64_t r = row_of_column[column_of_node[t]];
    if (r < 0) continue;  // errors and embeddings have no incoming edges
    for (int s = 0; s < N; ++s) {
      g.adjacency[int64_t(t) * N + s] = rows_[r * columns_.size + column_of_node[s]];
    }
  }
  return g;
}

AttributionGraph BuildAttributionGraph(Session& session, const TranscoderSet& transcoders,
                                       const std::vector<int>& ids, const GraphOptions& options) {
  AttributionGraphBuild build(session, transcoders, ids, options);
  while (!build.done()) {
    build.Continue();
    if (options.progress && build.phase() != AttributionGraphBuild::Phase::kEncoding &&
        !options.progress(build.rows_done(), build.rows_total())) {
      throw Error("graph: cancelled");
    }
  }
  return build.Finish();
}

}  // namespace gpt2
