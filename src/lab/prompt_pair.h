// The check every experiment on a clean and a corrupted prompt makes first (patching, path
// patching, attribution patching and its exact cells): positions are compared one to one.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"

namespace gpt2 {

// Throws gpt2::Error unless both prompts have tokens, the same number; `experiment` names what
// needs them ("patching", "path patching", ...).
inline void CheckPromptPair(const std::vector<int>& clean, const std::vector<int>& corrupted,
                            const char* experiment) {
  if (clean.empty() || corrupted.empty()) throw Error("Type a clean and a corrupted prompt.");
  if (clean.size() != corrupted.size()) {
    throw Error("The clean prompt is " + std::to_string(clean.size()) +
                " tokens and the corrupted one " + std::to_string(corrupted.size()) + ": " +
                experiment +
                " needs the same number of tokens (change a word for another of one token).");
  }
}

}  // namespace gpt2
