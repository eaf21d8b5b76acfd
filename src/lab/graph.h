// The attribution graph of a prompt (graph/graph.h) as a lab experiment over a Conversation:
// ids = [50256] + the prompt's ids, built on the conversation's session and given back through
// its Scope. Re-pruning with other thresholds needs no rebuild: PruneAttributionGraph(graph, ...)
// (graph/graph.h), SelectGraph and GraphJson (graph/graph_json.h). A computed graph's check is
// graph_check.h, its features' cards graph_card.h, its heads' QK attribution qk.h.
#pragma once

#include <memory>
#include <vector>

#include "graph/graph.h"
#include "lab/conversation.h"

namespace gpt2 {

// The graph is the plain model's: gpt2::Error if the conversation runs under interventions, or
// for an empty prompt, one past the context (with the BOS) or a target out of range.
AttributionGraph AttributionGraphOf(Conversation& c, const TranscoderSet& transcoders,
                                    const std::vector<int>& prompt, const GraphOptions& options);

// The same graph in steps (graph.h AttributionGraphBuild), for the page: the constructor makes
// the checks AttributionGraphOf makes, runs the real model and gives the conversation back at
// once (the steps only read the model and run the backward on the session's threads); each
// Continue() is one batch of feature rows. `transcoders` must outlive the job.
class GraphJob {
 public:
  GraphJob(Conversation& c, const TranscoderSet& transcoders, const std::vector<int>& prompt,
           const GraphOptions& options);
  GraphProgress Continue();  // runs the next step
  GraphProgress progress() const { return build_->progress(); }
  bool done() const { return build_->done(); }
  AttributionGraph Finish() { return build_->Finish(); }

 private:
  std::unique_ptr<AttributionGraphBuild> build_;
};

}  // namespace gpt2
