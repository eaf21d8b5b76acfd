// Attribution graphs (circuit-tracer's definition, safety-research/circuit-tracer attribute() and
// prune_graph()) over a per-block transcoder set (sae/transcoders.h), on ids that start with a BOS.
//
// The replacement model: the real forward with every attention pattern and every LayerNorm's
// 1/sigma (ln_1, ln_2, ln_f) frozen at the real run's values, and each block's MLP output
// replaced by recon + err, err = mlp_out - recon a constant and recon frozen. Its forward is the
// real one; what remains is linear in the stream, and gradients cross attention only through
// its value/output path (OV) and LayerNorms only through their frozen linear maps.
//
// Nodes, in circuit-tracer's order (the adjacency's rows and columns):
//   features    (layer, position >= 1, feature) with acts > 0: the transcoder of `layer` on the
//               real stream; a feature at position 0 (the BOS) is no node (circuit-tracer's
//               zero_bos), its write stays in the constant part with the biases
//   errors      err[l, p] for every block and position, layer-major (a block without a
//               transcoder: its whole MLP output is the error)
//   embeddings  wte[id_p] + wpe[p] for every position
//   logits      the chosen tokens at the last position
// Edge s -> t = (what s writes) . d(t's quantity)/d(the stream where s writes): a feature writes
// acts W_dec[f] into its block's MLP output, an error err[l, p] there, an embedding into the
// stream entering block 0. A feature's quantity is its pre-activation without b_enc,
// n(resid_mid[l, p]) . W_enc[:, f]; a logit's is ln_f(final stream at the last position) .
// (W_U[:, tok] - mean_v W_U[:, v]). adjacency[t][s] holds it (row: target).
//
// Every gradient is one batched backward through the frozen linear blocks: many targets' rows
// [target x position, C] at once (matmuls over those rows), only the blocks below each batch's
// highest target and the positions up to its last one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/session.h"
#include "sae/transcoders.h"

namespace gpt2 {

class ThreadPool;

enum class GraphNodeKind { kFeature, kError, kEmbedding, kLogit };

struct GraphNode {
  GraphNodeKind kind;
  int layer;       // features, errors; -1 for embeddings, n_layer for logits
  int position;
  int index;       // feature id (features), token id (embeddings, logits), -1 (errors)
  float activation;  // features: acts; logits: the token's probability; else 0
};

struct GraphOptions {
  std::vector<int> targets;  // logit tokens; empty: the most probable to desired_logit_prob
  double desired_logit_prob = 0.95;
  int max_n_logits = 10;
  int max_feature_nodes = -1;  // < 0: every active feature
  // Called with (targets done, targets in all); returning false stops with gpt2::Error
  // ("cancelled"). May be empty.
  std::function<bool(int, int)> progress;
};

struct AttributionGraph {
  std::vector<int> ids;
  int n_layer = 0;
  int n_pos = 0;
  int n_features = 0;  // selected: the first n_features nodes
  int n_logits = 0;    // the last n_logits nodes
  int64_t n_active = 0;  // active features found, selected or not
  std::vector<GraphNode> nodes;
  std::vector<float> adjacency;  // [N, N], N = nodes.size(): adjacency[t * N + s]
  int size() const { return static_cast<int>(nodes.size()); }
  float edge(int target, int source) const { return adjacency[int64_t(target) * size() + source]; }
  int error_begin() const { return n_features; }
  int embedding_begin() const { return n_features + n_layer * n_pos; }
  int logit_begin() const { return size() - n_logits; }
};

// The graph of ids (ids[0] should be the BOS, 50256) on `session` (reset and run over ids; its
// cache is then those ids' plain run) with `transcoders` bound to the session's model. Threads:
// the session's. Throws gpt2::Error for an id out of range, more ids than the context or a
// target out of the vocabulary.
AttributionGraph BuildAttributionGraph(Session& session, const TranscoderSet& transcoders,
                                       const std::vector<int>& ids, const GraphOptions& options);

// Where a stepped build is: first the prompt's features, a block per step (encoding: done of total
// blocks), then the adjacency's rows (done of total rows, the logits' first); finished once
// Finish() can pack the graph.
struct GraphProgress {
  bool encoding = true;
  int done = 0, total = 0;
  bool finished = false;
};

// The same build in steps, for a caller that must answer in between (the page's worker reads its
// cancel message only between calls): the constructor runs the real model on `session` (its one
// use of it); each Continue() then encodes one block's features, or sets up the columns, or runs
// the logits' rows, or one batch of feature rows (one backward pass over at most kBatch targets,
// fewer in the top blocks), so that every step stays short; Finish() packs the graph once done().
// BuildAttributionGraph is this loop. `transcoders` and the session's model and thread pool must
// outlive the build.
class AttributionGraphBuild {
 public:
  AttributionGraphBuild(Session& session, const TranscoderSet& transcoders, const std::vector<int>& ids,
                        const GraphOptions& options);
  ~AttributionGraphBuild();
  AttributionGraphBuild(const AttributionGraphBuild&) = delete;
  AttributionGraphBuild& operator=(const AttributionGraphBuild&) = delete;
  int rows_done() const;   // the logits' rows, then one per feature node
  int rows_total() const;  // 0 until every block is encoded
  bool done() const;
  GraphProgress progress() const;
  void Continue();
  AttributionGraph Finish();  // gpt2::Error before done()

 private:
  struct State;
  void EncodeBlock(int layer);
  void Prepare();
  std::unique_ptr<State> s_;
};

// circuit-tracer's prune_graph and graph scores over a built graph; thresholds in [0, 1]
// (gpt2::Error otherwise). Cheap next to building (a few products of N x N), so the page
// re-prunes with new thresholds from the same AttributionGraph without recomputing it.
struct PrunedGraph {
  std::vector<char> node_mask;         // [N]
  std::vector<char> edge_mask;         // [N, N] as adjacency
  std::vector<double> influence;       // [N] node influence on the logits (row-normalised |A|)
  std::vector<double> cumulative;      // [N] circuit-tracer's cumulative_scores (the JSON's "influence")
  double replacement_score = 0;
  double completeness_score = 0;
};
PrunedGraph PruneAttributionGraph(const AttributionGraph& graph, double node_threshold = 0.8,
                                  double edge_threshold = 0.98);

// The graph's prediction of logit node `logit`'s quantity changing when the feature nodes
// `chosen` are set to `value` (0: ablated): their activations move by value - act, and the
// linear frozen model carries that along the feature -> feature edges (an edge s -> t is
// act_s times the unit effect, so a change d_s adds edge * d_s / act_s to t's pre-activation,
// and an active feature passes it on with slope 1, never crossing ReLU's kink) to the logit.
// The full adjacency, not a pruned one: pruning drops edges for display, and a prediction
// without them would test the pruning instead of the graph; features not selected
// (max_feature_nodes) are absent from the graph and so stay fixed. gpt2::Error for a node that is
// not a feature, or `logit` not a logit node.
double PredictedLogitChange(const AttributionGraph& graph, const std::vector<int>& chosen, float value, int logit);

}  // namespace gpt2
