// The attribution graph of a prompt (graph/attribute.h) as a lab experiment over a Conversation:
// ids = [50256] + the prompt's ids, built on the conversation's session and given back through
// its Scope; at once, or as the Lab's job (job.h). Re-pruning with other thresholds needs no
// rebuild: PruneAttributionGraph(graph, ...) (graph/graph.h), SelectGraph and GraphJson
// (graph/graph_json.h). A computed graph's check is graph_check.h, its features' cards
// graph_card.h, its heads' QK attribution qk.h.
#pragma once

#include <memory>
#include <vector>

#include "graph/attribute.h"
#include "lab/conversation.h"
#include "lab/job.h"

namespace gpt2 {

// The graph is the plain model's: gpt2::Error if the conversation runs under interventions, or
// for an empty prompt, one past the context (with the BOS) or a target out of range.
AttributionGraph AttributionGraphOf(Conversation& c, const TranscoderSet& transcoders,
                                    const std::vector<int>& prompt, const GraphOptions& options);

// The same graph as a job, for the page: the constructor makes the checks AttributionGraphOf
// makes, runs the real model and gives the conversation back at once (the steps only read the
// model and run the backward on the session's threads); each Continue() is a step of the build
// (AttributionGraphBuild), and its progress counts blocks while encoding, then rows.
// `transcoders` must outlive the job.
class GraphJob : public Job {
 public:
  GraphJob(Conversation& c, const TranscoderSet& transcoders, const std::vector<int>& prompt,
           const GraphOptions& options);
  void Continue() override { build_->Continue(); }
  JobProgress progress() const override;
  AttributionGraph Finish() { return build_->Finish(); }  // gpt2::Error before done()
  // Whether a graph job's progress counts blocks being encoded (else rows).
  static bool Encoding(const JobProgress& progress);

 private:
  int n_layer_;
  std::unique_ptr<AttributionGraphBuild> build_;
};

}  // namespace gpt2
