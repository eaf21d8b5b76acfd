#include "lab/graph.h"

#include "base/error.h"
#include "model/config.h"

namespace gpt2 {

AttributionGraph AttributionGraphOf(Conversation& c, const TranscoderSet& transcoders,
                                    const std::vector<int>& prompt, const GraphOptions& options) {
  if (!c.interventions().empty()) {
    throw Error("The attribution graph reads the plain model; clear the interventions first.");
  }
  if (prompt.empty()) throw Error("The prompt is empty.");
  std::vector<int> ids = {kEndOfText};  // circuit-tracer's graphs start at a BOS
  ids.insert(ids.end(), prompt.begin(), prompt.end());
  c.CheckPrompt(static_cast<int>(ids.size()));
  for (int t : options.targets) c.RequireToken(t);
  return c.WithRestore([&] { return BuildAttributionGraph(c.UnrecordedSession(), transcoders, ids, options); });
}

}  // namespace gpt2
