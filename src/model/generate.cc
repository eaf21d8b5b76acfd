#include "model/generate.h"

#include "base/error.h"

namespace gpt2 {

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kMaxTokens: return "max_tokens";
    case StopReason::kEndOfText: return "end_of_text";
    case StopReason::kContextFull: return "context_full";
    case StopReason::kStoppedByCaller: return "stopped";
  }
  return "unknown";
}

StopReason Generate(Session& session, const std::vector<int>& prompt, const GenerateOptions& options,
                    const std::function<bool(int id)>& on_token) {
  const int n_vocab = session.model().config().n_vocab;
  const int n_ctx = session.model().config().n_ctx;
  Sampler sampler(options.sampling);
  const RunOptions& run = options.run;
  const float* logits = session.Prefill(prompt.data(), static_cast<int>(prompt.size()), run);
  for (int produced = 0; produced < options.max_tokens; ++produced) {
    const int id = sampler.Sample(logits, n_vocab);
    const bool go_on = on_token(id);
    if (options.stop_at_end_of_text && id == kEndOfText) return StopReason::kEndOfText;
    if (!go_on) return StopReason::kStoppedByCaller;
    if (produced + 1 == options.max_tokens) break;
    if (session.position() >= n_ctx) return StopReason::kContextFull;
    logits = session.Step(id, run);
  }
  return StopReason::kMaxTokens;
}

}  // namespace gpt2
