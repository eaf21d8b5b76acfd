#include "lab/graph.h"

#include <cstring>

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

bool GraphJob::Encoding(const JobProgress& progress) {
  return std::strcmp(progress.phase, AttributionGraphBuild::PhaseName(
                                         AttributionGraphBuild::Phase::kEncoding)) == 0;
}

JobProgress GraphJob::progress() const {
  const AttributionGraphBuild::Phase phase = build_->phase();
  JobProgress p;
  p.phase = AttributionGraphBuild::PhaseName(phase);
  p.finished = build_->done();
  if (phase == AttributionGraphBuild::Phase::kEncoding) {
    p.done = build_->blocks_encoded();
    p.total = n_layer_;
  } else {
    p.done = build_->rows_done();
    p.total = build_->rows_total();
  }
  return p;
}

}  // namespace gpt2
