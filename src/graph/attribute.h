// Building an attribution graph (circuit-tracer's attribute(), safety-research/circuit-tracer
// attribution/attribute.py) of ids that start with a BOS, through the replacement model
// (graph/replacement.h) over a per-block transcoder set. Its phases are circuit-tracer's: the
// real run and every block's features (setup_attribution), the logits to explain
// (compute_salient_logits) and their rows, then the features' rows in order of discovery (every
// active feature, or under max_feature_nodes the most influential so far by
// compute_partial_influences). The graph it makes is graph.h's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "graph/graph.h"
#include "graph/replacement.h"
#include "model/session.h"
#include "sae/transcoders.h"

namespace gpt2 {

struct GraphOptions {
  std::vector<int> targets;  // logit tokens; empty: the most probable to desired_logit_prob
  double desired_logit_prob = 0.95;
  int max_n_logits = 10;
  int max_feature_nodes = -1;  // < 0: every active feature
  // Called with (rows done, rows in all) after each step of the rows; returning false stops with
  // gpt2::Error ("cancelled"). May be empty.
  std::function<bool(int, int)> progress;
};

// The graph of ids (ids[0] should be the BOS, 50256) on `session` (reset and run over ids; its
// cache is then those ids' plain run) with `transcoders` bound to the session's model. Threads:
// the session's. Throws gpt2::Error for an id out of range, more ids than the context or a
// target out of the vocabulary.
AttributionGraph BuildAttributionGraph(Session& session, const TranscoderSet& transcoders,
                                       const std::vector<int>& ids, const GraphOptions& options);

// The same build in steps, for a caller that must answer in between (the page's worker reads its
// cancel message only between calls): the constructor runs the real model on `session` (its one
// use of it); each Continue() then takes one step of the current phase, short enough that the
// page stays responsive; Finish() packs the graph once done(). BuildAttributionGraph is this
// loop. `transcoders` and the session's model and thread pool must outlive the build.
class AttributionGraphBuild {
 public:
  enum class Phase {
    kEncoding,     // a block's features per step; after the last block, a step that lays out
                   // the columns and the logits' targets
    kLogitRows,    // one step: the logits' rows, one backward pass
    kFeatureRows,  // a batch of features' rows per step (one backward pass over at most kBatch
                   // targets, fewer in the top blocks)
    kDone,         // Finish() packs the graph
  };
  // "encoding", "logit rows", "feature rows", "done".
  static const char* PhaseName(Phase phase);

  AttributionGraphBuild(Session& session, const TranscoderSet& transcoders,
                        const std::vector<int>& ids, const GraphOptions& options);
  ~AttributionGraphBuild();
  AttributionGraphBuild(const AttributionGraphBuild&) = delete;
  AttributionGraphBuild& operator=(const AttributionGraphBuild&) = delete;

  Phase phase() const { return phase_; }
  bool done() const { return phase_ == Phase::kDone; }
  int blocks_encoded() const { return blocks_encoded_; }
  int rows_done() const { return rows_done_; }    // the logits' rows, then one per feature node
  int rows_total() const { return rows_total_; }  // 0 until the columns are laid out
  void Continue();
  AttributionGraph Finish();  // gpt2::Error before done()

 private:
  // The steps, one per Continue().
  void LayOutColumns();
  void RunLogitRows();
  void RunFeatureRows();
  void RankQueue();

  const Model& model_;
  ThreadPool& pool_;
  std::vector<int> ids_;
  GraphOptions options_;
  ReplacementModel replacement_;
  Phase phase_ = Phase::kEncoding;
  int blocks_encoded_ = 0;
  // Laid out once every block is encoded.
  AttributionColumns columns_;
  std::vector<int> logit_ids_;
  std::vector<float> logit_probs_;
  std::vector<AttributionTarget> logit_targets_;
  int feature_rows_ = 0;  // features to attribute: every active one, or max_feature_nodes
  int rows_total_ = 0;    // the logits' and the features'
  std::unique_ptr<ReplacementBackward> backward_;
  // The rows so far: row r [columns_.size] holds every edge into the node of column
  // column_of_row_[r] (a logit's, or a feature's). Left unset until a backward pass writes the
  // rows (ReplacementBackward::Run zeroes its own first): zeroing all of them up front was a
  // serial pass over tens of MB before any row.
  std::unique_ptr<float[]> rows_;
  std::vector<int64_t> column_of_row_;
  int rows_done_ = 0;
  std::vector<char> attributed_;  // [active features]: its row is done
  // The features to attribute next, in the order run, and the next one's place in it.
  std::vector<int64_t> queue_;
  size_t next_in_queue_ = 0;
};

}  // namespace gpt2
