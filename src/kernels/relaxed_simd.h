// Relaxed SIMD for the WebAssembly build: f32x4.relaxed_madd (an FMA where the CPU has one) and
// i32x4.relaxed_dot_i8x16_i7x16_add_s (4-byte integer dots).
//
// Debian's clang 14 and binaryen 108 know only the proposal's prototype opcodes, which browsers
// reject, so the kernels never emit relaxed instructions themselves: they call the functions
// below, and after linking scripts/relax-wasm.mjs (binaryen from npm, which has the final
// opcodes) replaces their bodies and inlines them, twice: with plain SIMD128 into the module
// (e.g. gpt2-engine.wasm) and with relaxed instructions into its twin (gpt2-engine-relaxed.wasm),
// which the page loads where WebAssembly.validate accepts relaxed SIMD. The C++ bodies in
// relaxed_simd.cc are only what a module that skipped that step would run: correct, slow.
#ifndef GPT2_KERNELS_RELAXED_SIMD_H_
#define GPT2_KERNELS_RELAXED_SIMD_H_

#if defined(__EMSCRIPTEN__)
#include <wasm_simd128.h>

// `const`: no memory access, so clang moves and merges the calls like the arithmetic they stand
// for; `noinline` (with a loop in the body, which binaryen 108 does not inline either) keeps
// each call visible to relax-wasm.mjs, which finds them by name (the modules are linked with
// --profiling-funcs; it writes them without the names, and without these exports).
#define GPT2_RELAXED_MARKER extern "C" __attribute__((noinline, const))

// a * b + c on f32x4: fused (one rounding) in the relaxed module where the CPU has FMA,
// otherwise a multiply and an add.
GPT2_RELAXED_MARKER v128_t gpt2_wasm_madd(v128_t a, v128_t b, v128_t c);
// c + the dot of each 4-byte group of a (signed) with b, one int32 lane per group. The relaxed
// instruction is exact for every a only where b's bytes are below 128; above, each engine and CPU
// has its own answer: V8 makes it vpdpbusd with AVX-VNNI (b unsigned), vpdpbssd with
// AVX-VNNI-INT8 and sdot on ARM (b signed), and elsewhere pmaddubsw + pmaddwd, whose int16 pair
// sums saturate. The kernels call it only where a probe found an exact one (matmul-wasm-inl.h
// RelaxedDotProbe). The plain module's body: b signed, exact.
GPT2_RELAXED_MARKER v128_t gpt2_wasm_dot_i8x16_i7x16_add(v128_t a, v128_t b, v128_t c);
// 1 in the relaxed module, 0 in the plain one: a constant once inlined, so the branches it picks
// between cost nothing (binaryen drops the other one).
GPT2_RELAXED_MARKER int gpt2_wasm_relaxed(void);
#endif

#endif  // GPT2_KERNELS_RELAXED_SIMD_H_
