#include "lab/qk.h"

#include "base/error.h"

namespace gpt2 {

QkAttribution QkAttributionOf(Conversation& c, const TranscoderSet& transcoders,
                              const std::vector<int>& ids, const ScoreSpec& spec, int k) {
  if (!c.interventions().empty()) {
    throw Error("QK attribution reads the plain model; clear the interventions first.");
  }
  c.CheckPrompt(static_cast<int>(ids.size()));
  for (int id : ids) c.RequireToken(id);
  CheckQkSpec(c.config(), static_cast<int>(ids.size()), spec, k);
  return c.WithRestore(
      [&] { return AttributeQk(c.UnrecordedSession(), transcoders, ids, spec, k); });
}

}  // namespace gpt2
