// Generation on a conversation, one token per call so a caller can stop between tokens
// (model/generate.h's TokenLoop, which the CLI's Generate runs in one go).
#pragma once

#include <vector>

#include "lab/conversation.h"
#include "model/generate.h"

namespace gpt2 {

class Generation {
 public:
  // A new conversation: the interventions set (iv, resolved), prompt run (captured if
  // `capture`, which stays the setting), timed per block.
  Generation(Conversation& c, const std::vector<int>& prompt, Interventions iv,
             const SamplingParams& sampling, int max_tokens, bool capture);
  // First applies `stop` to the token returned last (run it and go on, or end), then samples
  // the next; -1 when generation has ended (reason: stop_reason()), or when the conversation
  // started over under it.
  int Next(bool stop);
  StopReason stop_reason() const { return stop_reason_; }
  int produced() const { return loop_.produced(); }

 private:
  Conversation& c_;
  TokenLoop loop_;
  int restarts_;  // the conversation's when it started
  bool running_ = true;
  int pending_ = -1;  // the token Next returned last, not yet run or ended
  StopReason stop_reason_ = StopReason::kMaxTokens;
};

}  // namespace gpt2
