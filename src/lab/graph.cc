#include "lab/graph.h"

#include "base/error.h"

namespace gpt2 {
namespace {

// The checks both ways of building make, and the ids the graph is built on.
std::vector<int> GraphIds(const Conversation& c, const std::vector<int>& prompt,
                          const GraphOptions& options) {
  if (!c.interventions().empty()) {
    throw Error("The attribution graph reads the plain model; clear the interventions first.");
  }
  if (prompt.empty()) throw Error("The prompt is empty.");
  std::vector<int> ids = {kEndOfText};  // circuit-tracer's graphs start at a BOS
  ids.insert(ids.end(), prompt.begin(), prompt.end());
  c.CheckPrompt(static_cast<int>(ids.size()));
  for (int t : options.targets) c.RequireToken(t);
  return ids;
}

}  // namespace

AttributionGraph AttributionGraphOf(Conversation& c, const TranscoderSet& transcoders,
                                    const std::vector<int>& prompt, const GraphOptions& options) {
  const std::vector<int> ids = GraphIds(c, prompt, options);
  return c.WithRestore(
      [&] { return BuildAttributionGraph(c.UnrecordedSession(), transcoders, ids, options); });
}

GraphJob::GraphJob(Conversation& c, const TranscoderSet& transcoders,
                   const std::vector<int>& prompt, const GraphOptions& options)
    : n_layer_(c.config().n_layer) {
  const std::vector<int> ids = GraphIds(c, prompt, options);
  c.WithRestore([&] {
    build_ =
        std::make_unique<AttributionGraphBuild>(c.UnrecordedSession(), transcoders, ids, options);
    return 0;
  });
}

GraphProgress GraphJob::Continue() {
  build_->Continue();
  return progress();
}

GraphProgress GraphJob::progress() const {
  if (build_->phase() == AttributionGraphBuild::Phase::kEncoding) {
    return {true, build_->blocks_encoded(), n_layer_, false};
  }
  return {false, build_->rows_done(), build_->rows_total(), build_->done()};
}

}  // namespace gpt2
