// The one memory limit every layer checks against: the model's plan (model/config.h), a file
// arriving in chunks (format/arriving_file.h) and the converter's output (convert/).
#pragma once

#include <cstdint>

namespace gpt2 {

// Bytes a WebAssembly module may use: its 4 GB memory limit (-sMAXIMUM_MEMORY=4GB in
// src/bindings/CMakeLists.txt) less 64 kB, so that every buffer the plan admits has a size a
// 32-bit size_t holds.
constexpr int64_t kWasmMemoryBudget = (int64_t{4} << 30) - (int64_t{64} << 10);

}  // namespace gpt2
