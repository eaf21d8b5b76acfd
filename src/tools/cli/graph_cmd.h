#pragma once

namespace gpt2 {

// gpt2 graph --model M --transcoders T.gguf --prompt P [--target ID] [--no-prune]
// [--node-threshold X] [--edge-threshold Y] [--max-feature-nodes N] [--json OUT.json]
// [--threads N]; bad flags or transcoders that do not fit the model: a UsageError (exit 2).
int GraphCommand(int argc, char** argv);

}  // namespace gpt2
