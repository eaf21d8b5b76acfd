#include "lab/generation.h"

#include <algorithm>

namespace gpt2 {

namespace {

GenerateOptions Options(const SamplingParams& sampling, int max_tokens) {
  GenerateOptions options;
  options.sampling = sampling;
  options.max_tokens = std::max(0, max_tokens);
  options.run_last_token = true;
  return options;
}

}  // namespace

Generation::Generation(Conversation& c, const std::vector<int>& prompt, Interventions iv,
                       const SamplingParams& sampling, int max_tokens, bool capture)
    : c_(c), loop_(Options(sampling, max_tokens), c.config().n_vocab, c.config().n_ctx) {
  c.CheckPrompt(static_cast<int>(prompt.size()));
  c.SetInterventions(std::move(iv));
  c.Reset();
  c.SetCapture(capture);
  c.Run(prompt);
  restarts_ = c.restarts();
}

int Generation::Next(bool stop) {
  if (!running_ || c_.restarts() != restarts_) return -1;
  if (pending_ >= 0) {
    const TokenLoop::Next next = loop_.After(pending_, !stop, c_.position());
    const int id = pending_;
    pending_ = -1;
    if (next.run) c_.Step(id);
    if (next.stop) {
      stop_reason_ = next.reason;
      running_ = false;
      return -1;
    }
  } else if (loop_.Finished()) {
    stop_reason_ = StopReason::kMaxTokens;
    running_ = false;
    return -1;
  }
  pending_ = loop_.Sample(c_.logits());
  c_.set_unrun(pending_);
  return pending_;
}

}  // namespace gpt2
