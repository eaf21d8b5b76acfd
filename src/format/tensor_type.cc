// ggml type ids, names and block geometry (ggml.c type_traits: type_name, blck_size, type_size).
#include "format/tensor_type.h"

#include <string>

#include "base/error.h"

namespace gpt2 {
namespace {

// Indexed by ggml_type id (ggml.h enum ggml_type). Ids 4, 5 (q4_2, q4_3) and 31..33, 36..38
// (the repacked q4_0_NxM / iq4_nl_NxM layouts) were removed from ggml and from GGUF files, but
// old files may still carry them, so they keep their historical names for error messages.
constexpr const char* kGgmlTypeNames[] = {
    "f32",         // 0
    "f16",         // 1
    "q4_0",        // 2
    "q4_1",        // 3
    "q4_2",        // 4 (removed from ggml)
    "q4_3",        // 5 (removed from ggml)
    "q5_0",        // 6
    "q5_1",        // 7
    "q8_0",        // 8
    "q8_1",        // 9
    "q2_K",        // 10
    "q3_K",        // 11
    "q4_K",        // 12
    "q5_K",        // 13
    "q6_K",        // 14
    "q8_K",        // 15
    "iq2_xxs",     // 16
    "iq2_xs",      // 17
    "iq3_xxs",     // 18
    "iq1_s",       // 19
    "iq4_nl",      // 20
    "iq3_s",       // 21
    "iq2_s",       // 22
    "iq4_xs",      // 23
    "i8",          // 24
    "i16",         // 25
    "i32",         // 26
    "i64",         // 27
    "f64",         // 28
    "iq1_m",       // 29
    "bf16",        // 30
    "q4_0_4_4",    // 31 (removed from GGUF files)
    "q4_0_4_8",    // 32 (removed from GGUF files)
    "q4_0_8_8",    // 33 (removed from GGUF files)
    "tq1_0",       // 34
    "tq2_0",       // 35
    "iq4_nl_4_4",  // 36 (removed from GGUF files)
    "iq4_nl_4_8",  // 37 (removed from GGUF files)
    "iq4_nl_8_8",  // 38 (removed from GGUF files)
    "mxfp4",       // 39
    "nvfp4",       // 40
    "q1_0",        // 41
};
constexpr uint32_t kNumGgmlTypeNames = sizeof(kGgmlTypeNames) / sizeof(kGgmlTypeNames[0]);

[[noreturn]] void ThrowBadType(TensorType type) {
  throw Error("internal error: tensor type id " + std::to_string(static_cast<uint32_t>(type)) +
              " (" + GgmlTypeName(static_cast<uint32_t>(type)) +
              ") is not one of the types this engine supports");
}

}  // namespace

const char* GgmlTypeName(uint32_t ggml_type) {
  return ggml_type < kNumGgmlTypeNames ? kGgmlTypeNames[ggml_type] : "unknown";
}

bool IsSupportedType(uint32_t ggml_type) {
  switch (static_cast<TensorType>(ggml_type)) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kQ4_0:
    case TensorType::kQ8_0:
      return true;
  }
  return false;
}

int64_t TypeBlockSize(TensorType type) {
  switch (type) {
    case TensorType::kF32:
    case TensorType::kF16:
      return 1;
    case TensorType::kQ4_0:
    case TensorType::kQ8_0:
      return 32;  // QK4_0, QK8_0 (ggml-common.h)
  }
  ThrowBadType(type);
}

size_t TypeBlockBytes(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return 4;
    case TensorType::kF16:
      return 2;
    case TensorType::kQ4_0:
      return 18;  // sizeof(block_q4_0): f16 d + 16 bytes of nibbles
    case TensorType::kQ8_0:
      return 34;  // sizeof(block_q8_0): f16 d + 32 int8
  }
  ThrowBadType(type);
}

size_t RowBytes(TensorType type, int64_t n) {
  return static_cast<size_t>(n / TypeBlockSize(type)) * TypeBlockBytes(type);
}

}  // namespace gpt2
