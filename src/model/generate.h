// The generation loop shared by the CLI and the page: prefill the prompt, then sample and step
// until max_tokens, end-of-text, a full context, or the caller says stop.
#pragma once

#include <functional>
#include <vector>

#include "model/model.h"
#include "model/sampler.h"

namespace gpt2 {

struct GenerateOptions {
  SamplingParams sampling;
  int max_tokens = 64;
  bool stop_at_end_of_text = true;  // stop after sampling <|endoftext|> (50256); it is reported
  RunOptions run;  // observer and interventions, applied to the prompt and every step
};

enum class StopReason { kMaxTokens, kEndOfText, kContextFull, kStoppedByCaller };
const char* StopReasonName(StopReason reason);

// Runs the prompt from the session's current position (the prompt must fit: gpt2::Error
// otherwise) and reports each sampled id to on_token, which returns false to stop. When the
// context is full generation stops with kContextFull: the last sampled token is reported but
// not run, since there is no room left to run it.
StopReason Generate(Session& session, const std::vector<int>& prompt, const GenerateOptions& options,
                    const std::function<bool(int id)>& on_token);

}  // namespace gpt2
