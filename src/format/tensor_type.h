// Tensor element types the engine accepts, numbered as ggml numbers them (ggml.h enum ggml_type),
// because the numbers are what GGUF files store.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpt2 {

enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ8_0 = 8,
};

// Name of any ggml type id, supported or not ("q4_K", "bf16", ...), for error messages.
// Unknown ids give "unknown".
const char* GgmlTypeName(uint32_t ggml_type);

// True for the four types above.
bool IsSupportedType(uint32_t ggml_type);

// Elements per block (1 for F32/F16, 32 for Q8_0/Q4_0) and bytes per block.
int64_t TypeBlockSize(TensorType type);
size_t TypeBlockBytes(TensorType type);

// Bytes of a row of n elements; n must be a multiple of TypeBlockSize(type) (the caller checks).
size_t RowBytes(TensorType type, int64_t n);

}  // namespace gpt2
