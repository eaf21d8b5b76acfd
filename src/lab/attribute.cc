#include "lab/attribute.h"

#include "base/error.h"

namespace gpt2 {

Attribution Attribute(Conversation& c, const std::vector<int>& ids, int position, int target,
                      int contrast) {
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

Attribution AttributeConversation(Conversation& c, const LabInterventions& iv, int position,
                                  int target) {
  if (c.tokens().empty()) throw Error("Generate some text first.");
  const std::vector<int> ids = c.tokens();  // mean ablation may run the prompt in between
  const int prompt_length = static_cast<int>(c.prompt().size()), unrun = c.unrun();
  c.SetInterventions(c.Resolve(iv, MeansOf::kPrompt));
  Attribution a = Attribute(c, ids, position, target, -1);
  c.KeepMarks(prompt_length, unrun);
  return a;
}

}  // namespace gpt2
