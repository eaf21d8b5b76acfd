// `gpt2 saliency` and `gpt2 atp` (lab/gradients.h): the commands' flags, and their runs on a
// loaded model. main.cc parses the flags with these names and loads the model.
#pragma once

#include <set>
#include <string>

#include "kernels/kernels.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tools/cli/args.h"

namespace gpt2 {

// The flags of `command` ("saliency" or "atp"), without the intervention flags.
std::set<std::string> GradientsFlags(const std::string& command);

// Throws a UsageError naming the first required flag of `command` that `args` lacks.
void CheckGradientsFlags(const std::string& command, const Args& args);

// Runs `command`; prints its lines (TAB separated) to stdout. Bad flags are UsageErrors.
int GradientsCommand(const std::string& command, const Args& args, const Model& model,
                     const Tokenizer& tokenizer, int n_threads, QuantActivations activations);

}  // namespace gpt2
