// Per-target MatMul: y[t, r] = bias[r] + sum_c x[t, c] W[r, c] for f32/f16/Q8_0/Q4_0 weights
// (kernels.h). Included once per Highway target by kernels.cc (the skeleton.cc recipe).
//
// Shape of the work. Decode (T == 1) reads every weight byte once per token, so the loop streams
// kDecodeRows rows at a time (WASM int8: Int8DecodeGroups, 8 rows), rows a stride apart
// (ForEachStridedTile) so that each stream is long and sequential. Q8_0/Q4_0 weights by
// default meet int8 activations (QuantActivations::kInt8, ggml's q8_0 x q8_0 dot): x is
// quantized once per product (kernels.h MatMulInput), each weight block is widened to int16 in
// registers and multiplied-added in integers, and the block's int32 sum is scaled by dw * dx
// once. With f32 activations (kFloat) each block is decoded to f32 (int8 -> int32 -> f32) and
// multiplied straight into x, its partial sum scaled by d once. Prefill (T > 1) works on tiles of
// kPrefillRows rows x up to kTokenTile tokens: each weight block is decoded once and used for
// every token of the tile (int8), or each row group is dequantized once to f32 and then runs the
// f32 weights' tiles for all tokens (f32 activations, DequantizedRowGroup). The tile loop is
// row-outer, so each weight row is read from memory once per call while the activations stay in
// cache. WASM with int8 activations runs 2 rows over 8 tokens at a time instead
// (Int8PrefillRows), shaped by V8's code generation, with relaxed SIMD's byte dots where they
// are exact (vpdpbusd with AVX-VNNI, ARM's sdot); AVX-512 with VNNI (AVX3_DL) runs 16
// repacked rows over 16 tokens with vpdpbusd (VnniPrefill).
//
// Where each part lives, in the order the files build on each other: matmul-decode-inl.h (weights
// to f32 or int16 vectors), matmul-float-inl.h (FloatTile, QuantTile, DequantizeRow),
// matmul-int8-inl.h (the activation quantizer, Int8Tile), matmul-tiling-inl.h (rows and tokens
// into tiles on every target, DequantizedPrefill), matmul-wasm-inl.h (Int8Decode,
// Int8PrefillRows), matmul-vnni-inl.h (VnniPrefill); this file dispatches among them. What each
// runs at, and why the tuned constants are what they are: BENCHMARKS-history.md "The kernels'
// constants".
#if defined(GPT2_KERNELS_MATMUL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GPT2_KERNELS_MATMUL_INL_H_
#undef GPT2_KERNELS_MATMUL_INL_H_
#else
#define GPT2_KERNELS_MATMUL_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>

#include "kernels/internal.h"
#include "kernels/kernels.h"
#include "kernels/relaxed_simd.h"

// In the order they build on each other.
#include "kernels/matmul-decode-inl.h"  // weights to f32 or int16 vectors
#include "kernels/matmul-float-inl.h"   // f32 activations: FloatTile, QuantTile
#include "kernels/matmul-int8-inl.h"    // int8 activations: the quantizer, Int8Tile
#include "kernels/matmul-tiling-inl.h"  // rows and tokens into tiles, every target
#include "kernels/matmul-vnni-inl.h"    // AVX3_DL int8 prefill (vpdpbusd)
#include "kernels/matmul-wasm-inl.h"    // WASM int8 decode and prefill

HWY_BEFORE_NAMESPACE();
namespace gpt2 {
namespace HWY_NAMESPACE {
namespace matmul {

// kFastest's choice (kernels.h FastestQuantActivations): only AVX-512 without VNNI prefills
// faster in f32 (dequantized rows and FMA, about twice int8); every other target and every decode
// is faster in int8. BENCHMARKS-history.md "kFloatPrefillFaster".
constexpr bool kFloatPrefillFaster = HWY_TARGET == HWY_AVX3;

}  // namespace matmul

// What `path` multiplies with in the int8 prefill here (kernels.h Int8DotPathName): WASM's
// matmul::DotKind, -1 on targets with one way.
HWY_NOINLINE int Int8DotKindKernel(Int8DotPath path) {
#if HWY_TARGET == HWY_WASM
  return static_cast<int>(matmul::ResolveDotKind(path));
#else
  (void)path;
  return -1;
#endif
}

HWY_NOINLINE QuantActivations FastestQuantActivationsKernel(int64_t T) {
  return T > 1 && matmul::kFloatPrefillFaster ? QuantActivations::kFloat : QuantActivations::kInt8;
}

// Kernels.h StartMatMulInput: `in` takes the arguments (checked by kernels.cc) and is sized for
// QuantizeRowsKernel.
HWY_NOINLINE void StartMatMulInputKernel(const float* x, int64_t T, const WeightView& w,
                                         QuantActivations act,
                                         kernels_internal::MatMulInputData& in) {
  in.x = x;
  in.T = T;
  in.cols = w.cols;
  in.type = w.type;
  in.act = act == QuantActivations::kFastest ? FastestQuantActivationsKernel(T) : act;
  in.quantized = (w.type == TensorType::kQ8_0 || w.type == TensorType::kQ4_0) &&
                 in.act == QuantActivations::kInt8;
  in.target = HWY_TARGET;
  if (in.quantized) {
#if HWY_TARGET == HWY_WASM
    in.q.wasm_dot = T > 1 ? static_cast<int>(matmul::Int8DotKind()) : 0;
#endif
    matmul::SizeActivations(T, w.cols, w.type == TensorType::kQ4_0, in.q);
  }
}

// Kernels.h PrepareMatMulInputRows for an input that quantizes x (checked by kernels.cc).
HWY_NOINLINE void QuantizeRowsKernel(kernels_internal::MatMulInputData& in, int64_t t0,
                                     int64_t t1) {
  matmul::QuantizeActivations(in.x, t0, t1, in.cols, in.type == TensorType::kQ4_0, in.q);
}

static_assert(kMatMulRowGrain % matmul::kDecodeRows == 0 &&
                  kMatMulRowGrain % (4 * matmul::kInt8DecodeGroups) == 0 &&
                  kMatMulRowGrain % matmul::kPrefillRows == 0 &&
                  kMatMulRowGrain % matmul::kFmaPrefillRows == 0,
              "every row tile of MatMulKernel must divide kMatMulRowGrain (kernels.h)");

// `in` was prepared by this target for w's type and cols (checked by kernels.cc).
HWY_NOINLINE void MatMulKernel(const kernels_internal::MatMulInputData& in, const WeightView& w,
                               const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  const float* x = in.x;
  const int64_t T = in.T;
  if (T > 1 && in.act == QuantActivations::kFloat &&
      (w.type == TensorType::kQ8_0 || w.type == TensorType::kQ4_0)) {
    if (w.type == TensorType::kQ8_0) {
      matmul::DequantizedPrefill<BlockQ8_0>(x, T, w, bias, y, row_begin, row_end);
    } else {
      matmul::DequantizedPrefill<BlockQ4_0>(x, T, w, bias, y, row_begin, row_end);
    }
    return;
  }
  const matmul::Int8Activations* qa = in.quantized ? &in.q : nullptr;
  int64_t r = row_begin;
  if (T == 1) {
#if HWY_TARGET == HWY_WASM
    if (qa != nullptr) {
      r = w.type == TensorType::kQ8_0 ? matmul::Int8Decode<BlockQ8_0>(*qa, w, bias, y, r, row_end)
                                      : matmul::Int8Decode<BlockQ4_0>(*qa, w, bias, y, r, row_end);
    }
#endif
    r = matmul::ForEachStridedTile<matmul::kDecodeRows>(r, row_end, [&](int64_t r0, int64_t step) {
      matmul::RunTile<matmul::kDecodeRows, 1>(x, qa, 0, w, bias, y, r0, step);
    });
  } else {
#if HWY_TARGET == HWY_AVX3_DL
    if (qa != nullptr) {
      if (w.type == TensorType::kQ8_0) {
        matmul::VnniPrefill<BlockQ8_0>(*qa, w, bias, y, r, row_end);
      } else {
        matmul::VnniPrefill<BlockQ4_0>(*qa, w, bias, y, r, row_end);
      }
      return;
    }
#endif
#if HWY_TARGET == HWY_WASM
    if (qa != nullptr) {
      if (w.type == TensorType::kQ8_0) {
        matmul::Int8PrefillRows<BlockQ8_0>(x, *qa, w, bias, y, r, row_end);
      } else {
        matmul::Int8PrefillRows<BlockQ4_0>(x, *qa, w, bias, y, r, row_end);
      }
      return;
    }
#endif
#if HWY_TARGET == HWY_WASM
    if (qa == nullptr && gpt2_wasm_relaxed()) {
      for (; r + static_cast<int64_t>(matmul::kFmaPrefillRows) <= row_end;
           r += matmul::kFmaPrefillRows) {
        matmul::RunRowGroup<matmul::kFmaPrefillRows, 1>(x, qa, T, w, bias, y, r);
      }
    }
#endif
    for (; r + static_cast<int64_t>(matmul::kPrefillRows) <= row_end; r += matmul::kPrefillRows) {
      matmul::RunRowGroup<matmul::kPrefillRows>(x, qa, T, w, bias, y, r);
    }
  }
  for (; r < row_end; ++r) matmul::RunRowGroup<1>(x, qa, T, w, bias, y, r);
}

}  // namespace HWY_NAMESPACE
}  // namespace gpt2
HWY_AFTER_NAMESPACE();

#endif  // GPT2_KERNELS_MATMUL_INL_H_
