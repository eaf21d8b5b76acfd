#include "lab/attribute.h"

namespace gpt2 {

Attribution Attribute(Conversation& c, const std::vector<int>& ids, int position, int target, int contrast) {
  c.CheckPrompt(static_cast<int>(ids.size()));
  AttributionRequest request;
  request.position = position;
  request.target = target;
  request.contrast = contrast;
  Attribution a;
  c.Reset();
  c.Run(ids, [&](Session& session, const RunOptions& run) {
    request.interventions = run.interventions;
    request.observer = run.observer;
    a = AttributeLogit(session, ids, request);
    return a.last_logits;
  });
  return a;
}

}  // namespace gpt2
