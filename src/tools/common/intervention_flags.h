// The CLI's intervention flags, shared by generate, inspect and attribute:
//   --ablate-heads L.H[,L.H...]  --skip-attn L[,L...]  --skip-mlp L[,L...]
//   --no-residual L[,L...]       --post-norm
//   --sae S.gguf --steer F:ALPHA[,F:ALPHA...] --clamp F:VALUE[,F:VALUE...]   (src/sae/sae.h)
// A malformed list or a layer/head out of range is a UsageError (exit status 2) naming the flag
// and the valid range.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "model/config.h"
#include "model/run_options.h"
#include "tools/cli/args.h"

namespace gpt2 {

class UsageError : public Error {
 public:
  using Error::Error;
};

// Flag names (without "--") to add to a command's known flags; "post-norm" is a switch.
extern const char* const kInterventionFlags[8];

Interventions InterventionsFromArgs(const Args& args, const Config& config);

}  // namespace gpt2
