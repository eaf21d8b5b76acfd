// Helpers shared by the kernel dispatch code (kernels.cc) and the scalar twins (reference.cc).
// Not part of the kernels' interface.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "format/quant.h"
#include "kernels/kernels.h"

namespace gpt2 {
namespace kernels_internal {

// kernels.h ForceInt8DotPath's setting, an Int8DotPath (kAuto unless a test forced one).
extern std::atomic<int> forced_int8_dot_path;

// Half precision bits to float, the classic "magic multiply" conversion: shifting the 15
// magnitude bits into place gives a float whose exponent is 112 too small (normals) or a float
// denormal (half subnormals); multiplying by 2^112 fixes both with one rounding-free multiply.
// Infinities and NaNs (exponent 31) are rebuilt explicitly. Kept private to the kernels so they
// do not depend on format/f16.cc; the tests check it against an independent formulation.
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t magnitude = static_cast<uint32_t>(h & 0x7fffu) << 13;
  float f;
  if ((h & 0x7c00u) == 0x7c00u) {
    magnitude = 0x7f800000u | magnitude;  // inf or NaN, payload kept
    const uint32_t bits = sign | magnitude;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
  std::memcpy(&f, &magnitude, sizeof(f));
  f *= 5.192296858534828e+33f;  // 2^112
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  bits |= sign;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// One block of a row of the 8-bit KV cache (kernels.h): x[0, n), n <= kKvBlock, to int8 quants
// q[i * q_stride] for i < kKvBlock and the returned f16 scale bits. format/quant.h's
// QuantizeRowQ8_0 on the block padded with zeros (which change neither its scale nor its other
// quants, and quantize to 0), then the cache's two rules: an infinity or NaN makes the block
// zeros (QuantizeRowQ8_0's max scan would drop a NaN or not depending on where it sits), and a
// scale beyond f16's range saturates at 65504.
inline uint16_t QuantizeKvBlock(const float* x, int64_t n, int8_t* q, int64_t q_stride) {
  float padded[kKvBlock] = {};
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    padded[i] = x[i];
    finite = finite && x[i] - x[i] == 0.0f;
  }
  BlockQ8_0 block{};
  if (finite) QuantizeRowQ8_0(padded, &block, kKvBlock);
  for (int64_t i = 0; i < kKvBlock; ++i) q[i * q_stride] = block.qs[i];
  constexpr uint16_t kHalfMax = 0x7bff;  // 65504; d >= 0, so no sign bit
  return block.d > kHalfMax ? kHalfMax : block.d;
}

// Block geometry of the weight types, private copy of format/tensor_type.h's TypeBlockSize so
// the kernels link without the format layer.
inline int64_t BlockElems(TensorType type) {
  return (type == TensorType::kQ8_0 || type == TensorType::kQ4_0) ? 32 : 1;
}

// n elements of scratch in v, from its first 64-byte boundary (a cache line; AVX-512's vector): a
// std::vector's data is only as aligned as malloc's (8 or 16 bytes), and a vector load that
// straddles two cache lines costs two. Grows v when needed; what v held is not kept.
template <typename T>
T* FirstOnCacheLine(T* p) {
  constexpr size_t kLine = 64;
  const size_t misalign = reinterpret_cast<uintptr_t>(p) % kLine;
  return p + (misalign == 0 ? 0 : (kLine - misalign) / sizeof(T));
}
template <typename T>
T* CacheLineAligned(std::vector<T>& v, size_t n) {
  constexpr size_t kExtra = 64 / sizeof(T);
  if (v.size() < n + kExtra) v.resize(n + kExtra);
  return FirstOnCacheLine(v.data());
}

// Throws gpt2::Error unless the arguments describe a valid product (see kernels.h MatMul).
// Called once per MatMul, outside the hot loops.
void CheckMatMulArgs(const float* x, int64_t T, const WeightView& w, const float* y,
                     int64_t row_begin, int64_t row_end);
// The same for MatMulTransposed (kernels.h): dy [T, rows], dx [T, cols], a column range whose
// ends fall on block boundaries (or the last column).
void CheckMatMulTransposedArgs(const float* dy, int64_t T, const WeightView& w, const float* dx,
                               int64_t col_begin, int64_t col_end);

// x quantized per token for QuantActivations::kInt8 by matmul-int8-inl.h QuantizeActivations,
// laid out for the Highway target that did it: d_stride and q4_offset's lanes follow its vector
// width, so only that target's MatMul may read it (MatMulInputData::target).
// Int8Activations::wasm_dot of the int16 pairs (matmul-wasm-inl.h DotKind::kPairs).
constexpr int kWasmDotPairs = 5;

struct Int8Activations {
  std::vector<int16_t> q;  // [T, cols]: qx of format/quant.h QuantizeRowQ8_0, widened to int16
                           // once here rather than once per weight row
  std::vector<float> d;    // [T, d_stride]: dx as f32 (the f16 ggml stores), zero padded
  int64_t d_stride = 0;    // blocks per token rounded up to 2 f32 vectors (whole scale vectors)
  // For Q4_0 weights only: [T, cols / 32, int32 lanes] int32 vectors whose lanes sum to
  // -8 * sum_i qx[t, b, i]. Q4_0 blocks are then multiplied as raw nibbles n: a block's dot
  // starts from this vector instead of zero, and sum (n - 8) qx = sum n qx - 8 sum qx exactly,
  // without subtracting 8 from every weight of every row.
  std::vector<int32_t> q4_offset;
  // dx again, block-major: [cols / 32, T] (T > 1 only), so a tile loads its tokens' dx of one
  // block as one vector.
  std::vector<float> d_by_block;
  // q again, block-major: [cols / 32, T, 32] from FirstOnCacheLine(q_by_block.data()) (WASM
  // prefill only): a pass's tokens of one block then lie at fixed offsets from one address,
  // where V8 would otherwise compute and keep one address per token.
  std::vector<int16_t> q_by_block;
  // How a WASM prefill multiplies (matmul-wasm-inl.h DotKind, chosen once per product by
  // StartMatMulInputKernel): 0, widened, reads q_by_block; the 4-byte dots (kernels.h
  // Int8DotPath) read instead the same quants as int8, 4 tokens interleaved in 4-byte groups,
  // [cols / 32, ceil(T / 4), 8, 4 tokens, 4 bytes] from FirstOnCacheLine(q8_by_block.data()), so
  // that one vector holds 4 tokens' same 4 columns (one byte dot per 4 tokens, its lanes the
  // tokens), and each block's sum_i qx, block-major: [cols / 32, T].
  // The int16 pairs (DotKind kPairs) read q once more, 4 tokens interleaved in pairs of columns,
  // [cols / 32, ceil(T / 4), 16, 4 tokens, 2 columns] from FirstOnCacheLine(q16_by_pair.data()):
  // one vector holds 4 tokens' same 2 columns, so i32x4.dot_i16x8_s against a row's 2 weights
  // splat gives 4 tokens' partial dots in the 4 lanes, with no horizontal sum after.
  int wasm_dot = 0;
  std::vector<int8_t> q8_by_block;
  std::vector<int32_t> sum_by_block;
  std::vector<int16_t> q16_by_pair;
  // AVX-512 VNNI prefill only (AVX3_DL, T > 1; matmul-vnni-inl.h VnniPrefill), and then instead of
  // q, d, q4_offset and d_by_block (vnni_T > 0 says which): block-major over the tokens padded
  // to vnni_T = T rounded up to 4 (the pad tokens all zeros), so that a pass's tokens of one
  // block lie at fixed offsets from one address:
  //   vnni_q: [cols / 32, vnni_T, 32] qx as int8 (vpdpbusd's signed operand);
  //   vnni_start: [cols / 32, vnni_T] -o * sum_i qx, where o is what the unsigned weight bytes
  //     add to each weight (128 for Q8_0's sign-flipped quants, 8 for Q4_0's raw nibbles);
  //   vnni_dx: [cols / 32, vnni_T] dx as f32.
  std::vector<int8_t> vnni_q;
  std::vector<int32_t> vnni_start;
  std::vector<float> vnni_dx;
  int64_t vnni_T = 0;
  int64_t T = 0;

  // Where token t's first 4 bytes of block b lie in q8_by_block (its layout above); byte i of
  // that block is 16 * (i / 4) + i % 4 further. Q8Offset(cols / 32, 0) is the array's size.
  int64_t Q8Offset(int64_t b, int64_t t) const {
    return (b * ((T + 3) / 4) + t / 4) * 128 + t % 4 * 4;
  }
  // Where token t's first pair of block b lies in q16_by_pair (int16 elements); pair c is 8
  // further. Q16Offset(cols / 32, 0) is the array's size.
  int64_t Q16Offset(int64_t b, int64_t t) const {
    return (b * ((T + 3) / 4) + t / 4) * 128 + t % 4 * 2;
  }
};

// What a MatMulInput holds (kernels.h): the activations of one product, ready for any number of
// MatMul calls over its row ranges.
struct MatMulInputData {
  const float* x = nullptr;  // [T, cols], the caller's; read by the f32-activation paths
  int64_t T = 0;
  int64_t cols = 0;
  TensorType type = TensorType::kF32;              // the weight type it was prepared for
  QuantActivations act = QuantActivations::kInt8;  // resolved: never kFastest
  bool quantized = false;                          // q holds x (kInt8 with Q8_0/Q4_0 weights)
  int64_t target = 0;                              // the Highway target that prepared it
  Int8Activations q;  // buffers only grow: a steady token loop does not allocate
};

// What `in` holds, for the tests of the quantizer (kernels.cc). Throws if `in` was moved from.
const MatMulInputData& InputData(const MatMulInput& in);

}  // namespace kernels_internal
}  // namespace gpt2
