// The generation loop shared by the CLI and the page: prefill the prompt, then sample and step
// until max_tokens, end-of-text, a full context, or the caller says stop. TokenLoop holds the
// stopping rules; Generate runs them over a Session for the CLI, and src/lab/lab.h steps them one
// token per call for the page (which reads "stop" between tokens).
#pragma once

#include <functional>
#include <vector>

#include "model/sampler.h"
#include "model/session.h"

namespace gpt2 {

struct GenerateOptions {
  SamplingParams sampling;
  int max_tokens = 64;
  bool stop_at_end_of_text = true;  // stop after sampling <|endoftext|> (50256); it is reported
  // Run the last token sampled under max_tokens too (the page does, so its activations can be
  // inspected like the others'); the CLI has no use for them and leaves it unrun.
  bool run_last_token = false;
  RunOptions run;  // observer and interventions, applied to the prompt and every step
};

enum class StopReason { kMaxTokens, kEndOfText, kContextFull, kStoppedByCaller };
const char* StopReasonName(StopReason reason);

// The stopping rules, one sampled token at a time:
//   if (loop.Finished()) done;                 // max_tokens = 0
//   id = loop.Sample(logits);  ... report id ...
//   next = loop.After(id, go_on, session.position());
//   if (next.run) logits = run id;  if (next.stop) done with next.reason;
class TokenLoop {
 public:
  TokenLoop(const GenerateOptions& options, int n_vocab, int n_ctx);

  struct Next {
    bool run = false;   // run the token just sampled (its logits give the next one)
    bool stop = false;  // then generation ends, for `reason`
    StopReason reason = StopReason::kMaxTokens;
  };

  bool Finished() const { return produced_ >= max_tokens_; }
  int Sample(const float* logits);
  // What follows the token just sampled: go_on is the caller's answer after seeing it (false:
  // stop), position the session's position before running it.
  Next After(int id, bool go_on, int position) const;
  int produced() const { return produced_; }

 private:
  Sampler sampler_;
  int max_tokens_, n_vocab_, n_ctx_;
  bool stop_at_end_of_text_, run_last_token_;
  int produced_ = 0;
};

// Runs the prompt from the session's current position (the prompt must fit: gpt2::Error
// otherwise) and reports each sampled id to on_token, which returns false to stop. When the
// context is full generation stops with kContextFull: the last sampled token is reported but
// not run, since there is no room left to run it.
StopReason Generate(Session& session, const std::vector<int>& prompt,
                    const GenerateOptions& options, const std::function<bool(int id)>& on_token);

}  // namespace gpt2
