// `gpt2 path-patch`: path patching (src/lab/path_patch.h) from the command line.
#pragma once

namespace gpt2 {

// argv[1] is "path-patch". Returns the exit status; bad input throws UsageError (status 2).
int PathPatchCommand(int argc, char** argv);

}  // namespace gpt2
