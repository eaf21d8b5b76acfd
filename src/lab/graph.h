// The attribution graph of a prompt (graph/attribute.h) as a lab experiment over a Conversation:
// ids = [50256] + the prompt's ids, built on the conversation's session and given back through
// its Scope; at once, or in steps (GraphJob). Re-pruning with other thresholds needs no
// rebuild: PruneAttributionGraph(graph, ...) (graph/graph.h), SelectGraph and GraphJson
// (graph/graph_json.h). A computed graph's check is graph_check.h, its features' cards
// graph_card.h, its heads' QK attribution qk.h.
#pragma once

#include <memory>
#include <vector>

#include "graph/attribute.h"
#include "lab/conversation.h"

namespace gpt2 {

// The graph is the plain model's: gpt2::Error if the conversation runs under interventions, or
// for an empty prompt, one past the context (with the BOS) or a target out of range.
AttributionGraph AttributionGraphOf(Conversation& c, const TranscoderSet& transcoders,
                                    const std::vector<int>& prompt, const GraphOptions& options);

// Where a graph job is: while encoding, done of total blocks (then a step lays out the columns);
// then done of total rows, the logits' first; finished once Finish() can pack the graph.
struct GraphProgress {
  bool encoding = true;
  int done = 0, total = 0;
  bool finished = false;
};

// The same graph in steps, for the page: the constructor makes the checks AttributionGraphOf
// makes, runs the real model and gives the conversation back at once (the steps only read the
// model and run the backward on the session's threads); each Continue() is a step of the build
// (AttributionGraphBuild). `transcoders` must outlive the job.
class GraphJob {
 public:
  GraphJob(Conversation& c, const TranscoderSet& transcoders, const std::vector<int>& prompt,
           const GraphOptions& options);
  GraphProgress Continue();  // runs the next step
  GraphProgress progress() const;
  bool done() const { return build_->done(); }
  AttributionGraph Finish() { return build_->Finish(); }

 private:
  int n_layer_;
  std::unique_ptr<AttributionGraphBuild> build_;
};

}  // namespace gpt2
