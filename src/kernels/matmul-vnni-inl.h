// The AVX-512 VNNI path of MatMul (matmul-inl.h): int8-activation prefill with vpdpbusd on
// Highway's AVX3_DL target (VnniPrefill). Included once per Highway target, through
// matmul-inl.h; empty on every other target.
#if defined(GPT2_KERNELS_MATMUL_VNNI_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GPT2_KERNELS_MATMUL_VNNI_INL_H_
#undef GPT2_KERNELS_MATMUL_VNNI_INL_H_
#else
#define GPT2_KERNELS_MATMUL_VNNI_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "format/quant.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"
#include "kernels/matmul-int8-inl.h"

#if HWY_TARGET == HWY_AVX3_DL
HWY_BEFORE_NAMESPACE();
namespace gpt2 {
namespace HWY_NAMESPACE {
namespace matmul {

// ---- Int8-activation prefill with AVX-512 VNNI (AVX3_DL) -------------------------------------
//
// vpdpbusd multiplies 4 unsigned by 4 signed bytes and adds the 4 products into an int32 lane:
// 64 multiply-adds per instruction where an f32 FMA does 16, and no widening. Int8Tile's layout
// (a block's 32 weights across the lanes) would still need a horizontal sum per block, row and
// token; here lane l of a vector is row r + l instead, so each lane sums its own row's block dot
// and the dot needs no reduction: PackRowGroup repacks 16 rows once per call so that vector k of
// a block holds the 16 rows' columns 4k..4k+3, and each token's 4 quants of those columns are
// broadcast to all lanes (a memory operand). Per 16 rows, token and block: 8 vpdpbusd, a
// broadcast start value, a convert, the dw * dx multiply and one FMA; the f32 path
// (DequantizedRowGroup) does 32 FMAs.
//
// The weights are the unsigned operand: Q8_0 quants with the sign bit flipped (q + 128), Q4_0
// raw nibbles (q + 8), the o = 128 or 8 taken back through each block's start value
// -o * sum_i qx (Int8Activations::vnni_start), exact in int32 (|sum| <= 32 * 255 * 128). So the
// block dots are Int8Tile's exactly; each row then adds its blocks' float(dot) * (dw * dx) in
// block order with one FMA each, the same whatever the tiling (each lane is one row and token),
// so rows get the same bits however a product is split.
//
// Highway 1.0.3's AVX3_DL target string names avxvnni (the VEX form) but not avx512vnni, which
// _mm512_dpbusd_epi32 needs: the functions below are compiled with it added, and only called,
// never inlined, from code compiled without it. Highway's own attributes are popped first and
// pushed again after them: clang keeps the outer of two nested target attributes.
HWY_POP_ATTRIBUTES
HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR ",avx512vnni")

constexpr int64_t kVnniRows = 16;  // int32 lanes of a 512-bit vector: one weight row each
// Tokens per pass over a row group's packed blocks: their 16 f32 accumulators, the block's 8
// weight vectors, its scales and 3 temporaries take 28 of the 32 vector registers.
// BENCHMARKS-history.md "kVnniTokens".
constexpr int64_t kVnniTokens = 16;
static_assert(kMatMulRowGrain % kVnniRows == 0, "row groups must not straddle a row grain");
// One packed block: 8 vectors of weight bytes, then the 16 rows' dw as f32.
constexpr int64_t kVnniBlockBytes = 8 * 64 + kVnniRows * 4;

// Block's 32 weights as the unsigned bytes above, in column order.
HWY_INLINE __m256i VnniWeightBytes(const BlockQ8_0* HWY_RESTRICT block) {
  return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block->qs)),
                          _mm256_set1_epi8(static_cast<char>(0x80)));
}
HWY_INLINE __m256i VnniWeightBytes(const BlockQ4_0* HWY_RESTRICT block) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block->qs));
  const __m128i mask = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), mask),
                          _mm_and_si128(bytes, mask));
}

// Rows [r, r + n), n <= 16, of w into packed (kVnniBlockBytes per block, 64-byte aligned):
// block b's vector k, lane l = row r + l's weight bytes 4k..4k+3. Lanes l >= n repeat row
// r + n - 1 (never stored). The 16 x 8 transpose of 4-byte groups starts from
// z[j] = [row j | row j + 8] (lane 8h + k = row j + 8h, group k) and takes three rounds of
// two-source permutes, round p exchanging bit p of the vector index with bit p of the lane
// index; after them z[k] lane j + 8h = row j + 8h, group k.
template <typename Block>
HWY_NOINLINE void PackRowGroup(const WeightView& w, int64_t r, int64_t n,
                               uint8_t* HWY_RESTRICT packed) {
  const int64_t nb = w.cols / 32;
  const Block* HWY_RESTRICT rows[kVnniRows];
  for (int64_t l = 0; l < kVnniRows; ++l) {
    rows[l] = static_cast<const Block*>(w.data) + (r + HWY_MIN(l, n - 1)) * nb;
  }
  __m512i perm[3][2];
  for (int p = 0; p < 3; ++p) {
    for (int c = 0; c < 2; ++c) {
      HWY_ALIGN int32_t index[16];
      for (int pos = 0; pos < 16; ++pos) {
        index[pos] = (pos & ~(1 << p)) | (c << p) | (((pos >> p) & 1) << 4);
      }
      perm[p][c] = _mm512_load_si512(index);
    }
  }
  for (int64_t b = 0; b < nb; ++b) {
    __m512i z[8];
    for (int j = 0; j < 8; ++j) {
      z[j] = _mm512_inserti64x4(_mm512_castsi256_si512(VnniWeightBytes(rows[j] + b)),
                                VnniWeightBytes(rows[j + 8] + b), 1);
    }
    for (int p = 0; p < 3; ++p) {
      for (int j = 0; j < 8; ++j) {
        if (j & (1 << p)) continue;
        const __m512i lo = z[j], hi = z[j | (1 << p)];
        z[j] = _mm512_permutex2var_epi32(lo, perm[p][0], hi);
        z[j | (1 << p)] = _mm512_permutex2var_epi32(lo, perm[p][1], hi);
      }
    }
    uint8_t* HWY_RESTRICT out = packed + b * kVnniBlockBytes;
    for (int k = 0; k < 8; ++k) _mm512_store_si512(out + 64 * k, z[k]);
    HWY_ALIGN uint16_t d[kVnniRows];
    for (int64_t l = 0; l < kVnniRows; ++l) d[l] = rows[l][b].d;
    const __m256i d_bits = _mm256_load_si256(reinterpret_cast<const __m256i*>(d));
    _mm512_store_ps(out + 8 * 64, _mm512_cvtph_ps(d_bits));
  }
}

// acc[t] lane l = sum_b float(dot(qw[r + l, b], qx[t0 + t, b])) * (dw * dx), for a row group
// packed by PackRowGroup, tokens t0..t0 + kT - 1 (pad tokens give 0).
template <int64_t kT>
HWY_INLINE void VnniTile(const Int8Activations& a, int64_t t0, int64_t nb,
                         const uint8_t* HWY_RESTRICT packed, __m512 (&acc)[kT]) {
  for (int64_t t = 0; t < kT; ++t) acc[t] = _mm512_setzero_ps();
  const int64_t T = a.vnni_T;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* HWY_RESTRICT block = packed + b * kVnniBlockBytes;
    __m512i wv[8];
    for (int k = 0; k < 8; ++k) wv[k] = _mm512_load_si512(block + 64 * k);
    const __m512 dw = _mm512_load_ps(block + 8 * 64);
    const int8_t* HWY_RESTRICT q = a.vnni_q.data() + (b * T + t0) * 32;
    const int32_t* HWY_RESTRICT start = a.vnni_start.data() + b * T + t0;
    const float* HWY_RESTRICT dx = a.vnni_dx.data() + b * T + t0;
    // Unrolled, or GCC 12 turns the token loop inside out (tokens innermost, 2 blocks per step)
    // and keeps the accumulators on the stack (BENCHMARKS-history.md "kVnniTokens").
#pragma GCC unroll 16
    for (int64_t t = 0; t < kT; ++t) {
      __m512i dot = _mm512_set1_epi32(start[t]);
      for (int k = 0; k < 8; ++k) {
        int32_t x4;
        std::memcpy(&x4, q + t * 32 + 4 * k, 4);
        dot = _mm512_dpbusd_epi32(dot, wv[k], _mm512_set1_epi32(x4));
      }
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(dx[t]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[t]);
    }
  }
}

// Rows [r0, r1) of an int8-activation prefill: 16 rows at a time (the last group masked),
// packed once, then all tokens, kVnniTokens per pass and the rest 4 at a time.
template <typename Block>
HWY_NOINLINE void VnniPrefill(const Int8Activations& a, const WeightView& w,
                              const float* HWY_RESTRICT bias, float* HWY_RESTRICT y, int64_t r0,
                              int64_t r1) {
  const int64_t nb = w.cols / 32;
  static thread_local std::vector<uint8_t> scratch;  // per thread; grows only
  uint8_t* packed =
      kernels_internal::CacheLineAligned(scratch, static_cast<size_t>(nb * kVnniBlockBytes));
  for (int64_t r = r0; r < r1; r += kVnniRows) {
    const int64_t n = HWY_MIN(kVnniRows, r1 - r);
    PackRowGroup<Block>(w, r, n, packed);
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
    const __m512 bias_v =
        bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias + r) : _mm512_setzero_ps();
    const auto store = [&](const auto& acc, int64_t t0) {
      const int64_t tokens = HWY_MIN(static_cast<int64_t>(std::size(acc)), a.T - t0);
      for (int64_t t = 0; t < tokens; ++t) {
        _mm512_mask_storeu_ps(y + (t0 + t) * w.rows + r, mask, _mm512_add_ps(acc[t], bias_v));
      }
    };
    int64_t t0 = 0;
    for (; t0 + kVnniTokens <= a.vnni_T; t0 += kVnniTokens) {
      __m512 acc[kVnniTokens];
      VnniTile<kVnniTokens>(a, t0, nb, packed, acc);
      store(acc, t0);
    }
    for (; t0 < a.vnni_T; t0 += 4) {  // vnni_T is a multiple of 4
      __m512 acc[4];
      VnniTile<4>(a, t0, nb, packed, acc);
      store(acc, t0);
    }
  }
}

HWY_POP_ATTRIBUTES
HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR)  // HWY_BEFORE_NAMESPACE's again, for HWY_AFTER_NAMESPACE

}  // namespace matmul
}  // namespace HWY_NAMESPACE
}  // namespace gpt2
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET == HWY_AVX3_DL

#endif  // GPT2_KERNELS_MATMUL_VNNI_INL_H_
