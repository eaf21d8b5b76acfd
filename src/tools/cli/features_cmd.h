// `gpt2 features` (sparse autoencoders, lab/features.h).
#pragma once

namespace gpt2 {

// gpt2 features --model M --sae S.gguf --prompt P [--top K] [--bos] [--json FILE]; bad flags or
// an SAE that does not fit the model: a UsageError (exit status 2).
int FeaturesCommand(int argc, char** argv);

}  // namespace gpt2
