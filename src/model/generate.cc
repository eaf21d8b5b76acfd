#include "model/generate.h"

#include "base/error.h"

namespace gpt2 {

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kMaxTokens:
      return "max_tokens";
    case StopReason::kEndOfText:
      return "end_of_text";
    case StopReason::kContextFull:
      return "context_full";
    case StopReason::kStoppedByCaller:
      return "stopped";
  }
  return "unknown";
}

TokenLoop::TokenLoop(const GenerateOptions& options, int n_vocab, int n_ctx)
    : sampler_(options.sampling),
      max_tokens_(options.max_tokens),
      n_vocab_(n_vocab),
      n_ctx_(n_ctx),
      stop_at_end_of_text_(options.stop_at_end_of_text),
      run_last_token_(options.run_last_token) {}

int TokenLoop::Sample(const float* logits) {
  ++produced_;
  return sampler_.Sample(logits, n_vocab_);
}

TokenLoop::Next TokenLoop::After(int id, bool go_on, int position) const {
  Next next;
  next.stop = true;
  if (stop_at_end_of_text_ && id == kEndOfText) {
    next.reason = StopReason::kEndOfText;
  } else if (!go_on) {
    next.reason = StopReason::kStoppedByCaller;
  } else if (Finished() && !run_last_token_) {
    next.reason = StopReason::kMaxTokens;
  } else if (position >= n_ctx_) {
    next.reason = StopReason::kContextFull;
  } else {
    next.run = true;
    next.stop = Finished();
    next.reason = StopReason::kMaxTokens;
  }
  return next;
}

StopReason Generate(Session& session, const std::vector<int>& prompt,
                    const GenerateOptions& options, const std::function<bool(int id)>& on_token) {
  const Config& c = session.model().config();
  TokenLoop loop(options, c.n_vocab, c.n_ctx);
  const RunOptions& run = options.run;
  const float* logits = session.Prefill(prompt.data(), static_cast<int>(prompt.size()), run);
  if (loop.Finished()) return StopReason::kMaxTokens;
  for (;;) {
    const int id = loop.Sample(logits);
    const TokenLoop::Next next = loop.After(id, on_token(id), session.position());
    if (next.run) logits = session.Step(id, run);
    if (next.stop) return next.reason;
  }
}

}  // namespace gpt2
