// IEEE 754 half precision <-> single precision, written out because Highway 1.0.3 has no
// F16FromF32 and std::bit_cast is not available in both toolchains.
// F32ToF16 rounds to nearest, ties to even, like ggml's GGML_FP32_TO_FP16 and numpy's astype.
#pragma once

#include <cstdint>

namespace gpt2 {

float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);

}  // namespace gpt2
