// The placeholder bodies of relaxed_simd.h's functions (see there); scripts/relax-wasm.mjs
// replaces them after linking. Kept out of the kernels' translation unit so that clang cannot
// look inside them. Binaryen 108 (Emscripten's optimizer) inlines a function that has one
// caller, or is small and loop-free, unless it is exported: hence the exports and the loops.
#include "kernels/relaxed_simd.h"

#if defined(__EMSCRIPTEN__)
#include <emscripten.h>

EMSCRIPTEN_KEEPALIVE v128_t gpt2_wasm_madd(v128_t a, v128_t b, v128_t c) {
  alignas(16) float fa[4], fb[4], fc[4];
  wasm_v128_store(fa, a);
  wasm_v128_store(fb, b);
  wasm_v128_store(fc, c);
#pragma clang loop unroll(disable) vectorize(disable)
  for (int i = 0; i < 4; ++i) fc[i] = fa[i] * fb[i] + fc[i];
  return wasm_v128_load(fc);
}

EMSCRIPTEN_KEEPALIVE v128_t gpt2_wasm_dot_i8x16_i7x16_add(v128_t a, v128_t b, v128_t c) {
  alignas(16) int8_t fa[16], fb[16];
  alignas(16) int32_t fc[4];
  wasm_v128_store(fa, a);
  wasm_v128_store(fb, b);
  wasm_v128_store(fc, c);
#pragma clang loop unroll(disable) vectorize(disable)
  for (int i = 0; i < 16; ++i) fc[i / 4] += fa[i] * fb[i];
  return wasm_v128_load(fc);
}

EMSCRIPTEN_KEEPALIVE int gpt2_wasm_relaxed(void) {
  // 0, read from memory, so that binaryen 108 cannot fold it into the callers as a constant.
  static volatile int zero;
  int r = 0;
#pragma clang loop unroll(disable)
  for (int i = 0; i < 4; ++i) r |= zero;
  return r;
}
#endif
