// `gpt2 dashboard` (feature dashboards, lab/dashboard.h).
#pragma once

#include "kernels/kernels.h"
#include "tools/cli/args.h"

namespace gpt2 {

// The command's flags.
std::set<std::string> DashboardFlags();

// gpt2 dashboard --model M (--transcoders T.gguf | --sae S.gguf) --corpus FILE ...; bad flags, a
// dictionary that does not fit the model or an empty corpus: a UsageError (exit status 2).
int DashboardCommand(const Args& args, QuantActivations activations, int n_threads);

}  // namespace gpt2
