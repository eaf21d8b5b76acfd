// Every Highway kernel against its scalar twin (kernels/reference.h), on every target compiled
// into this binary and supported by the CPU, over awkward sizes. Test data for the quantized
// types comes from a quantizer written here after ggml's quantize_row_q8_0_ref /
// quantize_row_q4_0_ref, plus raw random blocks (any int8, subnormal and negative scales), so the
// tests do not depend on the format layer.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#if !defined(__EMSCRIPTEN__)
#include <hwy/targets.h>
#endif

#include "base/error.h"
#include "format/f16.h"
#include "format/quant.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"

namespace gpt2 {
namespace {

// ---- Error budgets --------------------------------------------------------------------------
// MatMul: float accumulation in a different order from the double reference. The budget is
// relative to sum_c |x_c W_rc| (the condition of the sum), so it holds for any cancellation.
// A budget of 2e-7 already fails on short rows (a few float roundings of the result and the
// bias); 2e-6 leaves a 10x margin. Worst case in theory is ~cols * 2^-24.
constexpr double kMatMulRelTol = 2e-6;
constexpr double kMatMulAbsTol = 1e-30;
// LayerNorm: float mean/variance vs double; inputs have |mean| ~ 3, outputs are O(1..10).
// 2e-6 fails at n = 4097 (float sums), so 2e-5 leaves a 10x margin.
constexpr double kLayerNormAbsTol = 2e-5;
constexpr double kLayerNormRelTol = 2e-5;
// Gelu: Highway's Exp is within 4 ulp, the sigmoid form adds a division and float rounding of
// x + 0.044715 x^3; observed within 1e-6 relative, budget 2x that. The absolute part covers
// x < ~-10 where the kernel returns 0 for values below 1e-37.
constexpr double kGeluAbsTol = 1e-7;
constexpr double kGeluRelTol = 2e-6;
// Softmax and attention probabilities: Exp (4 ulp) plus a float sum; observed within 2e-6.
constexpr double kProbAbsTol = 1e-7;
constexpr double kProbRelTol = 1e-5;
// Attention scores (float dot of head_dim terms) and outputs (convex combination of values);
// observed within 1e-6.
constexpr double kScoreAbsTol = 1e-5;
constexpr double kScoreRelTol = 1e-5;
constexpr double kAttentionOutAbsTol = 1e-5;

constexpr float kSentinel = -12345.5f;

// Runs body once per kernel target with dispatch pinned to it; restores normal dispatch even if
// an assertion throws.
void ForEachTarget(const std::function<void()>& body) {
  struct Restore {
    ~Restore() { ForceKernelTarget(0); }
  } restore;
  for (int64_t target : KernelTargets()) {
    ForceKernelTarget(target);
    INFO("kernel target " << KernelTargetName(target));
    body();
  }
}

// Runs body once per way of multiplying an int8-activation prefill (kernels.h Int8DotPath: in
// wasm the probe's choice, the widened dots and the two emulated 4-byte dots), restoring kAuto.
void ForEachInt8DotPath(const std::function<void()>& body) {
  struct Restore {
    ~Restore() { ForceInt8DotPath(Int8DotPath::kAuto); }
  } restore;
  for (Int8DotPath path : Int8DotPaths()) {
    ForceInt8DotPath(path);
    INFO("int8 prefill: " << Int8DotPathName(path));
    body();
  }
}

bool Near(double got, double want, double abs_tol, double rel_tol) {
  return std::fabs(got - want) <= abs_tol + rel_tol * std::fabs(want);
}

// ---- Test-local f16 and quantizers ----------------------------------------------------------

// float -> binary16 bits, round to nearest even (values beyond the f16 range become inf).
uint16_t ToHalf(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) {  // subnormal: multiples of 2^-24 (1024 rounds up to normal)
    return sign | static_cast<uint16_t>(std::nearbyint(a * std::ldexp(1.0, 24)));
  }
  int e;
  const double m = std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  int frac = static_cast<int>(std::nearbyint((2 * m - 1) * 1024));
  int biased = e - 1 + 15;
  if (frac == 1024) {
    frac = 0;
    ++biased;
  }
  if (biased >= 31) return sign | 0x7c00;
  return sign | static_cast<uint16_t>(biased << 10) | static_cast<uint16_t>(frac);
}

// binary16 bits -> float per IEEE 754 (finite values).
float FromHalf(uint16_t h) {
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return static_cast<float>((h & 0x8000) ? -v : v);
}

// ggml quantize_row_q8_0_ref.
std::vector<BlockQ8_0> QuantizeQ8_0(const std::vector<float>& x) {
  std::vector<BlockQ8_0> blocks(x.size() / 32);
  for (size_t b = 0; b < blocks.size(); ++b) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = ToHalf(d);
    for (int i = 0; i < 32; ++i) {
      blocks[b].qs[i] = static_cast<int8_t>(std::round(x[b * 32 + i] * id));
    }
  }
  return blocks;
}

// ggml quantize_row_q4_0_ref.
std::vector<BlockQ4_0> QuantizeQ4_0(const std::vector<float>& x) {
  std::vector<BlockQ4_0> blocks(x.size() / 32);
  for (size_t b = 0; b < blocks.size(); ++b) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < 32; ++i) {
      const float v = x[b * 32 + i];
      if (std::fabs(v) > amax) {
        amax = std::fabs(v);
        max = v;
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = ToHalf(d);
    for (int i = 0; i < 16; ++i) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[b * 32 + i] * id + 8.5f)));
      const int hi =
          std::min(15, static_cast<int>(static_cast<int8_t>(x[b * 32 + 16 + i] * id + 8.5f)));
      blocks[b].qs[i] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
  return blocks;
}

// A test weight matrix: its encoded bytes and the same weights decoded to f32 (test-local
// decoding, used for error budgets only).
struct TestWeights {
  TensorType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<float> dense;  // [rows, cols]
  WeightView View() const { return WeightView{type, bytes.data(), rows, cols}; }
};

uint16_t RandomHalfScale(std::mt19937& rng) {
  // Mostly normal scales of both signs around 1e-3..1e-1, sometimes subnormal.
  std::uniform_int_distribution<int> pick(0, 9), mantissa(0, 1023), exponent(5, 11), sign(0, 1);
  const int e = pick(rng) == 0 ? 0 : exponent(rng);
  return static_cast<uint16_t>((sign(rng) << 15) | (e << 10) | mantissa(rng));
}

// raw: random block bytes (every int8 / nibble value); otherwise quantized random floats.
TestWeights MakeWeights(TensorType type, int64_t rows, int64_t cols, bool raw, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  TestWeights w{type, rows, cols, {}, std::vector<float>(rows * cols)};
  std::vector<float> src(rows * cols);
  for (float& v : src) v = uni(rng);
  switch (type) {
    case TensorType::kF32:
      w.bytes.resize(src.size() * 4);
      std::memcpy(w.bytes.data(), src.data(), w.bytes.size());
      w.dense = src;
      break;
    case TensorType::kF16: {
      std::vector<uint16_t> h(src.size());
      std::uniform_int_distribution<int> bits(0, 0xffff);
      for (size_t i = 0; i < h.size(); ++i) {
        // raw: any finite half, including subnormals (exponent capped to keep sums moderate).
        h[i] = raw ? static_cast<uint16_t>(bits(rng) & 0xcfff) : ToHalf(src[i]);
        w.dense[i] = FromHalf(h[i]);
      }
      w.bytes.resize(h.size() * 2);
      std::memcpy(w.bytes.data(), h.data(), w.bytes.size());
      break;
    }
    case TensorType::kQ8_0: {
      std::vector<BlockQ8_0> blocks = QuantizeQ8_0(src);
      std::uniform_int_distribution<int> q(-128, 127);
      for (BlockQ8_0& b : blocks) {
        if (!raw) continue;
        b.d = RandomHalfScale(rng);
        for (int8_t& v : b.qs) v = static_cast<int8_t>(q(rng));
      }
      for (size_t i = 0; i < w.dense.size(); ++i) {
        const BlockQ8_0& b = blocks[i / 32];
        w.dense[i] = FromHalf(b.d) * b.qs[i % 32];
      }
      w.bytes.resize(blocks.size() * sizeof(BlockQ8_0));
      std::memcpy(w.bytes.data(), blocks.data(), w.bytes.size());
      break;
    }
    case TensorType::kQ4_0: {
      std::vector<BlockQ4_0> blocks = QuantizeQ4_0(src);
      std::uniform_int_distribution<int> byte(0, 255);
      for (BlockQ4_0& b : blocks) {
        if (!raw) continue;
        b.d = RandomHalfScale(rng);
        for (uint8_t& v : b.qs) v = static_cast<uint8_t>(byte(rng));
      }
      for (size_t i = 0; i < w.dense.size(); ++i) {
        const BlockQ4_0& b = blocks[i / 32];
        const int j = static_cast<int>(i % 32);
        const int nibble = j < 16 ? (b.qs[j] & 15) : (b.qs[j - 16] >> 4);
        w.dense[i] = FromHalf(b.d) * (nibble - 8);
      }
      w.bytes.resize(blocks.size() * sizeof(BlockQ4_0));
      std::memcpy(w.bytes.data(), blocks.data(), w.bytes.size());
      break;
    }
  }
  return w;
}

std::vector<float> RandomVector(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = uni(rng);
  return v;
}

const char* TypeName(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return "f32";
    case TensorType::kF16:
      return "f16";
    case TensorType::kQ8_0:
      return "q8_0";
    case TensorType::kQ4_0:
      return "q4_0";
  }
  return "?";
}

// x: [T, cols] as the int8-activation MatMul sees it: each row quantized to Q8_0 and decoded.
std::vector<float> Int8ActivationsDecoded(const std::vector<float>& x, int64_t T, int64_t cols) {
  std::vector<float> out(x.size());
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<BlockQ8_0> blocks =
        QuantizeQ8_0(std::vector<float>(x.begin() + t * cols, x.begin() + (t + 1) * cols));
    for (int64_t c = 0; c < cols; ++c) {
      out[t * cols + c] = FromHalf(blocks[c / 32].d) * blocks[c / 32].qs[c % 32];
    }
  }
  return out;
}

bool IsQuant(TensorType type) { return type == TensorType::kQ8_0 || type == TensorType::kQ4_0; }

// Compares MatMul with reference::MatMul on every target for one shape and row range; checks
// that rows outside the range keep their sentinel.
void CheckMatMul(const TestWeights& w, int64_t T, int64_t row_begin, int64_t row_end,
                 bool with_bias, QuantActivations act = QuantActivations::kInt8) {
  const bool int8 = IsQuant(w.type) && act == QuantActivations::kInt8;
  INFO(TypeName(w.type) << " rows " << w.rows << " cols " << w.cols << " T " << T << " range ["
                        << row_begin << ", " << row_end << ") bias " << with_bias
                        << (int8 ? " int8 activations" : ""));
  const std::vector<float> x = RandomVector(T * w.cols, 7 + static_cast<uint32_t>(T));
  const std::vector<float> bias = RandomVector(w.rows, 11);
  const float* b = with_bias ? bias.data() : nullptr;
  std::vector<float> want(T * w.rows, kSentinel);
  reference::MatMul(x.data(), T, w.View(), b, want.data(), row_begin, row_end, act);
  // Condition of each dot product: sum |x| |W| (+ |bias|), with x as the kernel multiplies it.
  const std::vector<float> xm = int8 ? Int8ActivationsDecoded(x, T, w.cols) : x;
  std::vector<double> magnitude(T * w.rows, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t r = row_begin; r < row_end; ++r) {
      double m = with_bias ? std::fabs(bias[r]) : 0.0;
      for (int64_t c = 0; c < w.cols; ++c) {
        m += std::fabs(static_cast<double>(xm[t * w.cols + c]) * w.dense[r * w.cols + c]);
      }
      magnitude[t * w.rows + r] = m;
    }
  }
  const auto check = [&] {
    std::vector<float> got(T * w.rows, kSentinel);
    MatMul(x.data(), T, w.View(), b, got.data(), row_begin, row_end, act);
    int bad = 0;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t r = 0; r < w.rows; ++r) {
        const int64_t i = t * w.rows + r;
        if (r < row_begin || r >= row_end) {
          if (got[i] != kSentinel) ++bad;  // outside the range: untouched
        } else if (!(std::fabs(got[i] - want[i]) <= kMatMulAbsTol + kMatMulRelTol * magnitude[i])) {
          if (bad < 3) {
            INFO("t " << t << " r " << r << " got " << got[i] << " want " << want[i]
                      << " magnitude " << magnitude[i]);
            CHECK(false);
          }
          ++bad;
        }
      }
    }
    CHECK(bad == 0);
  };
  ForEachTarget([&] {
    if (int8 && T > 1) {
      ForEachInt8DotPath(check);
    } else {
      check();
    }
  });
}

// ---- Tests ----------------------------------------------------------------------------------

TEST_CASE("Kernel targets can be listed, forced and restored", "[kernels]") {
  const std::vector<int64_t> targets = KernelTargets();
  REQUIRE(!targets.empty());
  for (int64_t target : targets) {
    ForceKernelTarget(target);
    CHECK(ActiveKernelTargetName() == KernelTargetName(target));
  }
  ForceKernelTarget(0);
  CHECK(KernelTargets() == targets);
  // Highway orders targets best first; normal dispatch uses the best.
  CHECK(ActiveKernelTargetName() == KernelTargetName(targets.front()));
#if defined(__EMSCRIPTEN__)
  CHECK(targets.size() == 1);
  CHECK(ActiveKernelTargetName() == "WASM");
#else
  // The VNNI int8 prefill lives in AVX3_DL, which Highway 1.0.3 compiles only when asked
  // (CMakeLists.txt HWY_WANT_AVX3_DL): a CPU with AVX-512 VNNI must find it compiled.
  const bool cpu_has_vnni = (hwy::SupportedTargets() & HWY_AVX3_DL) != 0;
  const bool compiled =
      std::find(targets.begin(), targets.end(), int64_t{HWY_AVX3_DL}) != targets.end();
  CHECK(compiled == cpu_has_vnni);
#endif
  CHECK_THROWS_AS(ForceKernelTarget(int64_t{1} << 40), Error);
}

// scripts/test.sh runs the kernel, golden and nano tests a second time on the wasm build's relaxed
// SIMD twin (tests/run-relaxed.cjs), selecting [relaxed] and leaving out [plain]: each side
// checks that it ran the kernels it was meant to (the twin's float prompts take the FMA tiles).
TEST_CASE("Plain builds run no relaxed SIMD kernels", "[kernels][plain]") {
  CHECK_FALSE(RelaxedSimdKernels());
}

TEST_CASE("The relaxed SIMD twin runs relaxed SIMD kernels", "[.][relaxed]") {
  CHECK(RelaxedSimdKernels());
}

TEST_CASE("Private HalfToFloat matches IEEE 754 for every bit pattern", "[kernels]") {
  int mismatches = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float got = kernels_internal::HalfToFloat(static_cast<uint16_t>(h));
    const int e = (h >> 10) & 0x1f;
    if (e == 31) {
      const bool is_nan = (h & 0x3ff) != 0;
      if (is_nan ? !std::isnan(got) : !(std::isinf(got) && std::signbit(got) == ((h >> 15) != 0))) {
        ++mismatches;
      }
    } else {
      const float want = FromHalf(static_cast<uint16_t>(h));
      if (std::memcmp(&got, &want, sizeof(float)) != 0) ++mismatches;
    }
  }
  CHECK(mismatches == 0);
}

// Runs convert(in + i, out + i, n) over consecutive pieces of every length from 1 to 37 in
// turn, so full vectors and every tail length of every target's lanes (4, 8, 16) are exercised,
// and checks that no call writes past its piece (the element after it is still the sentinel).
template <typename In, typename Out, typename Convert>
bool ConvertInPieces(const std::vector<In>& in, std::vector<Out>& out, Out sentinel,
                     const Convert& convert) {
  out.assign(in.size() + 1, sentinel);
  bool kept = true;
  int64_t len = 1;
  for (int64_t i = 0; i < static_cast<int64_t>(in.size()); i += len, len = len % 37 + 1) {
    const int64_t n = std::min<int64_t>(len, static_cast<int64_t>(in.size()) - i);
    convert(in.data() + i, out.data() + i, n);
    Out after = out[i + n];
    kept = kept && std::memcmp(&after, &sentinel, sizeof(Out)) == 0;
  }
  out.pop_back();
  return kept;
}

TEST_CASE("F16ToF32 gives format/f16's bits for every half on every target", "[kernels]") {
  std::vector<uint16_t> halves(0x10000);
  for (uint32_t h = 0; h <= 0xffff; ++h) halves[h] = static_cast<uint16_t>(h);
  std::vector<float> want(halves.size());
  reference::F16ToF32(halves.data(), want.data(), static_cast<int64_t>(halves.size()));
  ForEachTarget([&] {
    std::vector<float> got;
    CHECK(ConvertInPieces(halves, got, kSentinel,
                          [](const uint16_t* h, float* x, int64_t n) { F16ToF32(h, x, n); }));
    int mismatches = 0;
    for (size_t i = 0; i < halves.size(); ++i) {
      if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) ++mismatches;
    }
    CHECK(mismatches == 0);
  });
}

TEST_CASE("F32ToF16Saturated gives format/f16's bits of the clamped value on every target",
          "[kernels]") {
  const float tiny = std::ldexp(1.0f, -24);  // the smallest half subnormal
  auto from_bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
  };
  std::vector<float> edges = {0.0f,
                              1.0f,
                              0.5f,
                              1.0f / 3.0f,
                              65504.0f,
                              65505.0f,
                              std::nextafter(65520.0f, 0.0f),
                              65520.0f,
                              1e30f,
                              std::numeric_limits<float>::max(),
                              std::numeric_limits<float>::infinity(),
                              tiny,
                              0.5f * tiny,
                              std::nextafter(0.5f * tiny, 1.0f),
                              1.5f * tiny,
                              2.5f * tiny,
                              1023.0f * tiny,
                              1023.5f * tiny,
                              std::nextafter(1023.5f * tiny, 0.0f),
                              std::ldexp(1.0f, -14),
                              std::nextafter(std::ldexp(1.0f, -14), 0.0f),
                              std::numeric_limits<float>::denorm_min(),
                              1e-40f,
                              std::numeric_limits<float>::min(),
                              1.0f + std::ldexp(1.0f, -11),
                              1.0f + 3.0f * std::ldexp(1.0f, -11),
                              std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f),
                              std::nextafter(2.0f, 0.0f),
                              2.0f - std::ldexp(1.0f, -11),
                              2048.0f + 1.0f,
                              2048.0f + 3.0f,
                              32768.0f + 16.0f,
                              from_bits(0x7fc00000u),
                              from_bits(0x7f800001u),
                              from_bits(0x7fbfffffu),
                              from_bits(0x7f802000u),
                              from_bits(0x7fffe000u)};
  for (size_t i = 0, n = edges.size(); i < n; ++i) edges.push_back(-edges[i]);
  // Random bit patterns: every pattern (a third NaN or beyond the clamp), then magnitudes near
  // the half range (float exponents 100..144: below the subnormals up to beyond 65504), where
  // the rounding happens.
  std::vector<float> x = edges;
  std::mt19937 rng(10);
  for (int i = 0; i < 1 << 21; ++i) x.push_back(from_bits(static_cast<uint32_t>(rng())));
  for (int i = 0; i < 1 << 21; ++i) {
    const uint32_t u = static_cast<uint32_t>(rng());
    const uint32_t exponent = 100 + (u >> 23) % 45;
    x.push_back(from_bits((u & 0x807fffffu) | (exponent << 23)));
  }
  std::vector<uint16_t> want(x.size());
  reference::F32ToF16Saturated(x.data(), want.data(), static_cast<int64_t>(x.size()));
  // The twin itself, on the edges: the clamp saturates, ties go to even, NaN stays NaN.
  CHECK(want[4] == 0x7bff);
  CHECK(want[7] == 0x7bff);
  CHECK(want[10] == 0x7bff);
  CHECK(want[edges.size() / 2 + 10] == 0xfbff);
  CHECK(want[12] == 0x0000);
  CHECK(want[14] == 0x0002);
  CHECK(want[17] == 0x0400);
  CHECK((want[32] & 0x7c00) == 0x7c00);
  CHECK((want[32] & 0x3ff) != 0);
  ForEachTarget([&] {
    std::vector<uint16_t> got;
    CHECK(ConvertInPieces(x, got, uint16_t{0x5a5a}, [](const float* f, uint16_t* h, int64_t n) {
      F32ToF16Saturated(f, h, n);
    }));
    int mismatches = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (got[i] != want[i]) {
        if (mismatches < 5) {
          uint32_t u;
          std::memcpy(&u, &x[i], sizeof(u));
          UNSCOPED_INFO("float bits 0x" << std::hex << u << ": got 0x" << got[i] << ", want 0x"
                                        << want[i]);
        }
        ++mismatches;
      }
    }
    CHECK(mismatches == 0);
  });
}

TEST_CASE("MatMul decodes the ggml block layouts", "[kernels]") {
  // Q4_0 with d = 1: qs[i] = i | (15 - i) << 4, so w[i] = i - 8 and w[16 + i] = 7 - i.
  BlockQ4_0 q4;
  q4.d = 0x3c00;
  for (int i = 0; i < 16; ++i) q4.qs[i] = static_cast<uint8_t>(i | ((15 - i) << 4));
  // Q8_0 with d = -0.5: w[i] = -0.5 * (i * 8 - 128).
  BlockQ8_0 q8;
  q8.d = 0xb800;
  for (int i = 0; i < 32; ++i) q8.qs[i] = static_cast<int8_t>(i * 8 - 128);
  std::vector<float> x(32, 0.0f);
  for (int i = 0; i < 32; ++i) x[i] = std::ldexp(1.0f, -i % 8) * (i % 3 == 0 ? -1 : 1);
  double want4 = 0, want8 = 0;
  for (int i = 0; i < 32; ++i) {
    want4 += x[i] * (i < 16 ? i - 8 : 7 - (i - 16));
    want8 += x[i] * -0.5 * (i * 8 - 128);
  }
  const WeightView w4{TensorType::kQ4_0, &q4, 1, 32};
  const WeightView w8{TensorType::kQ8_0, &q8, 1, 32};
  constexpr QuantActivations kF = QuantActivations::kFloat;
  float y = 0;
  reference::MatMul(x.data(), 1, w4, nullptr, &y, 0, 1, kF);
  CHECK(y == static_cast<float>(want4));
  reference::MatMul(x.data(), 1, w8, nullptr, &y, 0, 1, kF);
  CHECK(y == static_cast<float>(want8));
  ForEachTarget([&] {
    MatMul(x.data(), 1, w4, nullptr, &y, 0, 1, kF);
    CHECK(y == static_cast<float>(want4));  // every product and partial sum is exact
    MatMul(x.data(), 1, w8, nullptr, &y, 0, 1, kF);
    CHECK(y == static_cast<float>(want8));
  });

  // Int8 activations: x = k u with integers |k| <= 127, u = 2^-6 and max|x| = 127 u, so the
  // quantization is exact (dx = u, an f16; qx = k) and so is every sum below.
  std::vector<float> xi(32);
  for (int i = 0; i < 32; ++i) xi[i] = std::ldexp(static_cast<float>((i * 37) % 255 - 127), -6);
  xi[5] = std::ldexp(127.0f, -6);
  double want4i = 0, want8i = 0;
  for (int i = 0; i < 32; ++i) {
    want4i += xi[i] * (i < 16 ? i - 8 : 7 - (i - 16));
    want8i += xi[i] * -0.5 * (i * 8 - 128);
  }
  reference::MatMul(xi.data(), 1, w4, nullptr, &y, 0, 1);
  CHECK(y == static_cast<float>(want4i));
  reference::MatMul(xi.data(), 1, w8, nullptr, &y, 0, 1);
  CHECK(y == static_cast<float>(want8i));
  ForEachTarget([&] {
    MatMul(xi.data(), 1, w4, nullptr, &y, 0, 1, QuantActivations::kInt8);
    CHECK(y == static_cast<float>(want4i));
    MatMul(xi.data(), 1, w8, nullptr, &y, 0, 1, QuantActivations::kInt8);
    CHECK(y == static_cast<float>(want8i));
  });
}

TEST_CASE("MatMul decodes every finite f16 block scale exactly", "[kernels]") {
  // One row per finite binary16 scale d (63488 rows: the decode row tiles, groups and single
  // rows all see some), each block's weights 1, 0, ..., 0, and x = (127 u, 0, ..., 0) with
  // u = 2^-6, which int8 activations quantize exactly (dx = u, qx = 127): y = d * 127 u, exact in
  // f32 for every d, subnormals included.
  std::vector<uint16_t> scales;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    if (((h >> 10) & 0x1f) != 31) scales.push_back(static_cast<uint16_t>(h));
  }
  const int64_t rows = static_cast<int64_t>(scales.size());
  std::vector<BlockQ8_0> q8(scales.size());
  std::vector<BlockQ4_0> q4(scales.size());
  for (size_t r = 0; r < scales.size(); ++r) {
    q8[r].d = scales[r];
    q4[r].d = scales[r];
    for (int i = 0; i < 32; ++i) q8[r].qs[i] = i == 0 ? 1 : 0;
    for (int i = 0; i < 16; ++i) q4[r].qs[i] = i == 0 ? 0x89 : 0x88;  // nibble - 8: 1, 0, ...
  }
  std::vector<float> x(32, 0.0f);
  x[0] = std::ldexp(127.0f, -6);
  std::vector<float> want(scales.size());
  for (size_t r = 0; r < scales.size(); ++r) want[r] = FromHalf(scales[r]) * x[0];
  const WeightView w8{TensorType::kQ8_0, q8.data(), rows, 32};
  const WeightView w4{TensorType::kQ4_0, q4.data(), rows, 32};
  ForEachTarget([&] {
    for (const WeightView& w : {w8, w4}) {
      for (QuantActivations act : {QuantActivations::kInt8, QuantActivations::kFloat}) {
        INFO(TypeName(w.type) << (act == QuantActivations::kInt8 ? " int8" : " f32"));
        std::vector<float> y(scales.size());
        MatMul(x.data(), 1, w, nullptr, y.data(), 0, rows, act);
        int bad = 0;
        for (size_t r = 0; r < scales.size(); ++r) {
          if (y[r] != want[r]) {
            if (bad < 3) {
              INFO("scale bits " << scales[r] << " got " << y[r] << " want " << want[r]);
              CHECK(false);
            }
            ++bad;
          }
        }
        CHECK(bad == 0);
      }
    }
  });
}

TEST_CASE("Int8-activation MatMul follows ggml's q8_0 x q8_0 dot", "[kernels]") {
  // Independent of reference.cc: the test's own ggml quantizer for x and the block formula of
  // ggml_vec_dot_q8_0_q8_0 / _q4_0_q8_0, sumf += (dw * dx) * sumi.
  constexpr int64_t kRows = 5, kCols = 96, kT = 3;
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    const TestWeights w = MakeWeights(type, kRows, kCols, false, 300);
    std::vector<float> x = RandomVector(kT * kCols, 301, -3.0f, 3.0f);
    x[40] = 0.0f;
    for (int i = 64; i < 96; ++i) x[i] = 0.0f;  // an all-zero block: dx = 0, qx = 0
    std::vector<float> want(kT * kRows), got(kT * kRows);
    for (int64_t t = 0; t < kT; ++t) {
      const std::vector<BlockQ8_0> qx =
          QuantizeQ8_0(std::vector<float>(x.begin() + t * kCols, x.begin() + (t + 1) * kCols));
      for (int64_t r = 0; r < kRows; ++r) {
        double sum = 0;
        for (int64_t b = 0; b < kCols / 32; ++b) {
          // The block's f16 scale (the first field of both block types); w.dense = dw * q
          // exactly (q an integer, |q| <= 128), so q = dense / dw.
          const size_t block_bytes =
              type == TensorType::kQ8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
          uint16_t dw_bits;
          std::memcpy(&dw_bits, w.bytes.data() + (r * (kCols / 32) + b) * block_bytes, 2);
          const float dw = FromHalf(dw_bits);
          int64_t isum = 0;
          for (int i = 0; i < 32; ++i) {
            const double q = dw == 0.0f ? 0.0 : w.dense[r * kCols + b * 32 + i] / dw;
            isum += static_cast<int64_t>(std::lround(q)) * qx[b].qs[i];
          }
          sum += static_cast<double>(dw * FromHalf(qx[b].d)) * static_cast<double>(isum);
        }
        want[t * kRows + r] = static_cast<float>(sum);
      }
    }
    reference::MatMul(x.data(), kT, w.View(), nullptr, got.data(), 0, kRows);
    for (int64_t i = 0; i < kT * kRows; ++i) {
      INFO(TypeName(type) << " i " << i);
      CHECK(Near(got[i], want[i], 1e-6, 1e-6));
    }
  }
}

// Blocks of 32 activations that a vector quantizer could get wrong: ties of x * id at .5 (id = 1
// when amax = 127), an all-zero block (d = 0, id = 0) and one of -0, subnormals (d subnormal or
// 0; id inf, so x * id is inf or, for x = 0, NaN), values whose d overflows f16, the largest
// floats, inf and NaN, and random blocks over many magnitudes.
std::vector<float> AdversarialActivations() {
  std::vector<std::vector<float>> blocks;
  std::vector<float> ties(32);
  ties[0] = 127.0f;
  for (int i = 1; i < 32; ++i)
    ties[i] = (i % 2 ? 1.0f : -1.0f) * (static_cast<float>(i * 4) + 0.5f);
  blocks.push_back(ties);
  std::vector<float> near_ties(32);
  near_ties[0] = -127.0f;
  for (int i = 1; i < 32; ++i) {
    const float tie = (i % 2 ? 1.0f : -1.0f) * (static_cast<float>(i) + 0.5f);
    near_ties[i] = i % 4 < 2 ? std::nextafter(tie, 0.0f) : std::nextafter(tie, 2 * tie);
  }
  blocks.push_back(near_ties);
  blocks.push_back(std::vector<float>(32, 0.0f));
  blocks.push_back(std::vector<float>(32, -0.0f));
  std::vector<float> subnormal(32, 0.0f);
  for (int i = 0; i < 32; i += 3)
    subnormal[i] = (i % 2 ? -1.0f : 1.0f) * 1e-40f * static_cast<float>(i + 1);
  blocks.push_back(subnormal);
  std::vector<float> tiny(32);
  for (int i = 0; i < 32; ++i)
    tiny[i] = (i % 2 ? -1.0f : 1.0f) * std::numeric_limits<float>::denorm_min() *
              static_cast<float>(i % 5);
  blocks.push_back(tiny);
  std::vector<float> f16_overflow(32);
  for (int i = 0; i < 32; ++i) f16_overflow[i] = 1e7f * static_cast<float>(i - 16) / 16.0f;
  blocks.push_back(f16_overflow);
  std::vector<float> huge(32, 1.0f);
  huge[5] = std::numeric_limits<float>::max();
  huge[6] = -std::numeric_limits<float>::max() / 3;
  huge[7] = 1e-30f;
  blocks.push_back(huge);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::vector<std::pair<int, float>>& specials :
       std::vector<std::vector<std::pair<int, float>>>{
           {{3, inf}}, {{0, -inf}, {9, 2.0f}}, {{4, nan}}, {{0, nan}, {1, 3.0f}}, {{31, nan}}}) {
    std::vector<float> b = RandomVector(32, 40 + static_cast<uint32_t>(blocks.size()));
    for (const auto& s : specials) b[s.first] = s.second;
    blocks.push_back(b);
  }
  std::mt19937 rng(41);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (int k = 0; k < 40; ++k) {
    std::vector<float> b = RandomVector(32, 100 + k);
    const float scale = std::ldexp(1.0f, exponent(rng));
    for (float& v : b) v *= scale;
    if (k % 4 == 0) b[k % 32] = std::round(b[k % 32]) + 0.5f;  // a tie where id is not 1
    blocks.push_back(b);
  }
  std::vector<float> x;
  for (const std::vector<float>& b : blocks) x.insert(x.end(), b.begin(), b.end());
  return x;
}

TEST_CASE("Int8 activations are quantized exactly as QuantizeRowQ8_0 on every target",
          "[kernels]") {
  // The kernels' vector quantizer against format/quant.h's scalar one (ggml's
  // quantize_row_q8_0_ref), bit for bit: quants, the f16 scale (kept as f32) and, for Q4_0
  // weights, the -8 sum qx offset. Rows of 1 block, 3 blocks and 5 blocks (odd counts leave
  // partial scale vectors).
  const std::vector<float> adversarial = AdversarialActivations();
  for (int64_t cols : {32, 96, 160}) {
    const int64_t T = static_cast<int64_t>(adversarial.size()) / cols;
    const std::vector<float> x(adversarial.begin(), adversarial.begin() + T * cols);
    std::vector<BlockQ8_0> want(x.size() / 32);
    QuantizeRowQ8_0(x.data(), want.data(), static_cast<int64_t>(x.size()));
    for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
      for (int64_t n : {T, int64_t{1}}) {
        ForEachTarget([&] {
          INFO(TypeName(type) << " cols " << cols << " T " << n);
          MatMulInput in;
          PrepareMatMulInput(x.data(), n, WeightView{type, nullptr, 0, cols},
                             QuantActivations::kInt8, in);
          const kernels_internal::MatMulInputData& data = kernels_internal::InputData(in);
          REQUIRE(data.quantized);
          const kernels_internal::Int8Activations& a = data.q;
          const int64_t nb = cols / 32;
          const size_t lanes = type == TensorType::kQ4_0 ? a.q4_offset.size() / (n * nb) : 0;
          int bad = 0;
          for (int64_t t = 0; t < n; ++t) {
            for (int64_t b = 0; b < nb; ++b) {
              const BlockQ8_0& w = want[t * nb + b];
              const float wd = kernels_internal::HalfToFloat(w.d);
              uint32_t got_bits, want_bits;
              std::memcpy(&want_bits, &wd, 4);
              int32_t sum = 0;
              for (int i = 0; i < 32; ++i) sum += w.qs[i];
              if (a.vnni_T > 0) {  // AVX-512 VNNI prefill's own block-major layout
                const int64_t e = b * a.vnni_T + t;
                std::memcpy(&got_bits, &a.vnni_dx[e], 4);
                bool same = got_bits == want_bits &&
                            a.vnni_start[e] == (type == TensorType::kQ4_0 ? -8 : -128) * sum;
                for (int i = 0; i < 32; ++i) same = same && a.vnni_q[e * 32 + i] == w.qs[i];
                if (!same && bad++ < 3) {
                  INFO("token " << t << " block " << b << " x[0] " << x[(t * nb + b) * 32]);
                  CHECK(same);
                }
                continue;
              }
              std::memcpy(&got_bits, &a.d[t * a.d_stride + b], 4);
              bool same = got_bits == want_bits;
              for (int i = 0; i < 32; ++i) same = same && a.q[(t * nb + b) * 32 + i] == w.qs[i];
              if (lanes > 0) {
                const int32_t* o = a.q4_offset.data() + (t * nb + b) * lanes;
                same = same && o[0] == -8 * sum;
                for (size_t i = 1; i < lanes; ++i) same = same && o[i] == 0;
              }
              if (n > 1) same = same && std::memcmp(&a.d_by_block[b * n + t], &wd, 4) == 0;
              if (!same && bad++ < 3) {
                INFO("token " << t << " block " << b << " x[0] " << x[(t * nb + b) * 32]);
                CHECK(same);
              }
            }
          }
          CHECK(bad == 0);
          // The pad tokens up to a multiple of 4 are zeros (their sums must come out 0).
          for (int64_t t = n; t < a.vnni_T; ++t) {
            for (int64_t b = 0; b < nb; ++b) {
              const int64_t e = b * a.vnni_T + t;
              bool zero = a.vnni_start[e] == 0 && a.vnni_dx[e] == 0.0f;
              for (int i = 0; i < 32; ++i) zero = zero && a.vnni_q[e * 32 + i] == 0;
              CHECK(zero);
            }
          }
        });
      }
    }
  }
}

TEST_CASE("MatMul over a prepared input gives MatMul's bits when split at row grains",
          "[kernels]") {
  for (TensorType type :
       {TensorType::kF32, TensorType::kF16, TensorType::kQ8_0, TensorType::kQ4_0}) {
    const TestWeights w = MakeWeights(type, 2 * kMatMulRowGrain + 23, 96, false, 600);
    const std::vector<float> bias = RandomVector(w.rows, 601);
    for (int64_t T : {1, 3, 8}) {
      const std::vector<float> x = RandomVector(T * w.cols, 602 + static_cast<uint32_t>(T));
      for (QuantActivations act :
           {QuantActivations::kInt8, QuantActivations::kFloat, QuantActivations::kFastest}) {
        ForEachTarget([&] {
          INFO(TypeName(type) << " T " << T << " act " << static_cast<int>(act));
          std::vector<float> whole(T * w.rows), split(T * w.rows, kSentinel);
          MatMul(x.data(), T, w.View(), bias.data(), whole.data(), 0, w.rows, act);
          MatMulInput in;
          PrepareMatMulInput(x.data(), T, w.View(), act, in);
          const int64_t bounds[] = {0, kMatMulRowGrain, 2 * kMatMulRowGrain, w.rows};
          for (int i = 0; i + 1 < 4; ++i) {
            MatMul(in, w.View(), bias.data(), split.data(), bounds[i], bounds[i + 1]);
          }
          CHECK(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)) == 0);
          // Prepared in token ranges, last first, into an input last used for another shape.
          MatMulInput parts;
          PrepareMatMulInput(x.data(), 1, MakeWeights(TensorType::kQ4_0, 1, 32, false, 1).View(),
                             QuantActivations::kInt8, parts);
          StartMatMulInput(x.data(), T, w.View(), act, parts);
          PrepareMatMulInputRows(parts, T / 2, T);
          PrepareMatMulInputRows(parts, 0, T / 2);
          std::fill(split.begin(), split.end(), kSentinel);
          MatMul(parts, w.View(), bias.data(), split.data(), 0, w.rows);
          CHECK(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)) == 0);
        });
      }
    }
  }
}

TEST_CASE("MatMul rejects a prepared input that does not fit", "[kernels]") {
  const TestWeights q8 = MakeWeights(TensorType::kQ8_0, 4, 64, false, 700);
  const TestWeights q4 = MakeWeights(TensorType::kQ4_0, 4, 64, false, 701);
  const TestWeights wide = MakeWeights(TensorType::kQ8_0, 4, 96, false, 702);
  const std::vector<float> x = RandomVector(2 * 64, 703);
  std::vector<float> y(2 * 4);
  MatMulInput in;
  PrepareMatMulInput(x.data(), 2, q8.View(), QuantActivations::kInt8, in);
  CHECK_THROWS_AS(MatMul(in, q4.View(), nullptr, y.data(), 0, 4), Error);
  CHECK_THROWS_AS(MatMul(in, wide.View(), nullptr, y.data(), 0, 4), Error);
  CHECK_THROWS_AS(MatMul(in, q8.View(), nullptr, y.data(), 0, 5), Error);
  MatMul(in, q8.View(), nullptr, y.data(), 0, 4);
  CHECK_THROWS_AS(PrepareMatMulInputRows(in, 1, 3), Error);
  CHECK_THROWS_AS(PrepareMatMulInputRows(in, -1, 1), Error);
  CHECK_THROWS_AS(PrepareMatMulInput(nullptr, 2, q8.View(), QuantActivations::kInt8, in), Error);
  CHECK_THROWS_AS(PrepareMatMulInput(x.data(), 2, WeightView{TensorType::kQ8_0, nullptr, 4, 48},
                                     QuantActivations::kInt8, in),
                  Error);
  MatMulInput moved = std::move(in);
  CHECK_THROWS_AS(MatMul(in, q8.View(), nullptr, y.data(), 0, 4), Error);  // NOLINT: moved from
  CHECK_THROWS_AS(PrepareMatMulInputRows(in, 0, 1), Error);
  // Prepared by one target, used while dispatch picks another: the layouts differ.
  const std::vector<int64_t> targets = KernelTargets();
  if (targets.size() > 1) {
    struct Restore {
      ~Restore() { ForceKernelTarget(0); }
    } restore;
    ForceKernelTarget(targets[0]);
    PrepareMatMulInput(x.data(), 2, q8.View(), QuantActivations::kInt8, moved);
    ForceKernelTarget(targets[1]);
    CHECK_THROWS_AS(MatMul(moved, q8.View(), nullptr, y.data(), 0, 4), Error);
  }
}

TEST_CASE("MatMul rejects bad arguments", "[kernels]") {
  std::vector<float> x(64), y(4);
  std::vector<BlockQ8_0> blocks(4);
  const WeightView bad_cols{TensorType::kQ8_0, blocks.data(), 2, 48};
  CHECK_THROWS_AS(MatMul(x.data(), 1, bad_cols, nullptr, y.data(), 0, 2), Error);
  const WeightView good{TensorType::kQ8_0, blocks.data(), 2, 64};
  CHECK_THROWS_AS(MatMul(x.data(), 1, good, nullptr, y.data(), 1, 3), Error);
  CHECK_THROWS_AS(MatMul(x.data(), 1, good, nullptr, y.data(), 2, 1), Error);
  const WeightView bad_type{static_cast<TensorType>(6), blocks.data(), 2, 64};
  CHECK_THROWS_AS(MatMul(x.data(), 1, bad_type, nullptr, y.data(), 0, 2), Error);
  CHECK_THROWS_AS(reference::MatMul(x.data(), 1, bad_cols, nullptr, y.data(), 0, 2), Error);
}

TEST_CASE("MatMul f32/f16 matches the scalar twin on awkward sizes", "[kernels]") {
  constexpr int64_t kRows = 11;  // 2 decode tiles of 4 + 3, 5 prefill tiles of 2 + 1
  for (TensorType type : {TensorType::kF32, TensorType::kF16}) {
    for (int64_t cols : {1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 4097}) {
      for (bool raw : {false, true}) {
        if (raw && type == TensorType::kF32) continue;
        const TestWeights w =
            MakeWeights(type, kRows, cols, raw, 100 + static_cast<uint32_t>(cols));
        for (int64_t T : {1, 2, 3, 5, 8}) {
          CheckMatMul(w, T, 0, kRows, true);
          CheckMatMul(w, T, 1, kRows - 1, false);
          CheckMatMul(w, T, 3, 4, true);
          CheckMatMul(w, T, 5, 5, true);
        }
      }
    }
  }
}

TEST_CASE("MatMul q8_0/q4_0 matches the scalar twin on awkward sizes", "[kernels]") {
  constexpr int64_t kRows = 11;
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    for (int64_t cols : {32, 64, 96, 4096}) {
      for (bool raw : {false, true}) {
        const TestWeights w =
            MakeWeights(type, kRows, cols, raw, 200 + static_cast<uint32_t>(cols));
        for (int64_t T : {1, 2, 3, 5, 8}) {
          for (QuantActivations act : {QuantActivations::kInt8, QuantActivations::kFloat}) {
            CheckMatMul(w, T, 0, kRows, true, act);
            CheckMatMul(w, T, 1, kRows - 1, false, act);
            CheckMatMul(w, T, 3, 4, true, act);
            CheckMatMul(w, T, 5, 5, true, act);
          }
        }
      }
    }
  }
}

TEST_CASE("MatMul's kFastest is exactly one of kInt8 and kFloat", "[kernels]") {
  // Which one is a speed choice per target (kernels.h); the result must be that mode's, bit
  // for bit, so the accuracy tests of both modes cover it.
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    const TestWeights w = MakeWeights(type, 9, 96, false, 500);
    for (int64_t T : {1, 2, 5}) {
      const std::vector<float> x = RandomVector(T * w.cols, 501);
      ForEachTarget([&] {
        const QuantActivations chosen = FastestQuantActivations(T);
        INFO(TypeName(type) << " T " << T);
        CHECK((chosen == QuantActivations::kInt8 || chosen == QuantActivations::kFloat));
        std::vector<float> fastest(T * w.rows), explicit_mode(T * w.rows);
        MatMul(x.data(), T, w.View(), nullptr, fastest.data(), 0, w.rows,
               QuantActivations::kFastest);
        MatMul(x.data(), T, w.View(), nullptr, explicit_mode.data(), 0, w.rows, chosen);
        CHECK(fastest == explicit_mode);
      });
    }
  }
  // Decode is int8 on every target: it is the faster one wherever measured.
  ForEachTarget([] { CHECK(FastestQuantActivations(1) == QuantActivations::kInt8); });
}

TEST_CASE("MatMul f32/f16 decode covers its row tiles", "[kernels]") {
  // Float decode takes strided tiles of 4 rows (kDecodeRows), then single rows: 39 = 9 * 4 + 3.
  constexpr int64_t kRows = 39;
  for (TensorType type : {TensorType::kF32, TensorType::kF16}) {
    for (int64_t cols : {9, 768}) {
      const TestWeights w =
          MakeWeights(type, kRows, cols, false, 450 + static_cast<uint32_t>(cols));
      CheckMatMul(w, 1, 0, kRows, true);
      CheckMatMul(w, 1, 3, kRows - 1, false);
    }
  }
}

TEST_CASE("MatMul q8_0/q4_0 decode covers the wide WASM row tiles", "[kernels]") {
  // WASM's int8-activation decode takes 8 rows at a time (kInt8DecodeGroups groups of 4), then
  // groups of 4, then single rows: 143 = 17 * 8 + 4 + 3; rows [3, 142) are 17 * 8 + 3 and
  // rows [1, 29) 3 * 8 + 4.
  constexpr int64_t kRows = 143;
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    for (bool raw : {false, true}) {
      const TestWeights w = MakeWeights(type, kRows, 96, raw, 400);
      for (QuantActivations act : {QuantActivations::kInt8, QuantActivations::kFloat}) {
        CheckMatMul(w, 1, 0, kRows, true, act);
        CheckMatMul(w, 1, 3, kRows - 1, false, act);
        CheckMatMul(w, 1, 1, 29, true, act);
      }
    }
  }
}

TEST_CASE("MatMul q8_0/q4_0 decode covers runs shortened to spread the streams", "[kernels]") {
  // 1027 rows of 1024 columns (GPT-2 medium's width): runs of 128 rows put the 8 streams of the
  // WASM int8 decode 128 * 1088 (Q8_0) or 128 * 576 (Q4_0) bytes apart, a multiple of 4096, so
  // ForEachStridedTile shortens the runs (matmul-tiling-inl.h) and leaves 8-56 more rows to the
  // groups of 4 and the single rows after them. Every row must still come out, once.
  constexpr int64_t kRows = 1027, kCols = 1024;
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    const TestWeights w = MakeWeights(type, kRows, kCols, false, 470);
    CheckMatMul(w, 1, 0, kRows, true);
    CheckMatMul(w, 1, 5, kRows - 2, false);
  }
}

TEST_CASE("MatMul q8_0/q4_0 prefill covers the WASM token passes", "[kernels]") {
  // WASM's int8-activation prefill runs 2 rows over 8 tokens at a time (kPrefillRowsWasm rows,
  // kPrefillGroups groups of 4), then 4, then the last 0-3 tokens row by row, and an odd last
  // row alone: 31 = 3 * 8 + 4 + 3, 16 = 2 * 8, 13 = 8 + 4 + 1, 12 = 8 + 4; rows 7 and 3 are odd.
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    for (bool raw : {false, true}) {
      const TestWeights w = MakeWeights(type, 7, 96, raw, 470);
      for (int64_t T : {12, 13, 16, 31}) {
        CheckMatMul(w, T, 0, 7, true);
        CheckMatMul(w, T, 2, 5, false);
      }
    }
  }
}

TEST_CASE("MatMul's int8 prefill paths give the same bits", "[kernels]") {
  // Each path's block dots are exact integers and the float steps after them the same, so every
  // path (the relaxed 4-byte dot where this engine's probe found one, and both emulated ones)
  // must give the widened path's bits for any weights, not only within CheckMatMul's tolerance.
  WARN("int8 prefill here: " << Int8DotPathName(Int8DotPath::kAuto));
  if (Int8DotPaths().size() > 1) {
    // A byte-dot path runs only once its kernel has reproduced the widened bits on a product of
    // its own, else the widened path does: the emulated ones must pass that, or the checks
    // below would compare the widened path with itself.
    CHECK(Int8DotPathName(Int8DotPath::kEmulatedUnsignedB) == "4-byte dot emulated, b unsigned");
    CHECK(Int8DotPathName(Int8DotPath::kEmulatedSignedB) == "4-byte dot emulated, b signed");
    CHECK(Int8DotPathName(Int8DotPath::kPairs) == "int16 pairs");
  }
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    const TestWeights w = MakeWeights(type, 7, 192, false, 475);
    for (int64_t T : {5, 13, 31}) {
      const std::vector<float> x = RandomVector(T * w.cols, 476 + static_cast<uint32_t>(T));
      const std::vector<float> bias = RandomVector(w.rows, 477);
      std::vector<float> widened(T * w.rows);
      ForceInt8DotPath(Int8DotPaths().size() > 1 ? Int8DotPath::kWidened : Int8DotPath::kAuto);
      MatMul(x.data(), T, w.View(), bias.data(), widened.data(), 0, w.rows);
      ForEachInt8DotPath([&] {
        INFO(TypeName(type) << " T " << T);
        std::vector<float> got(T * w.rows);
        MatMul(x.data(), T, w.View(), bias.data(), got.data(), 0, w.rows);
        CHECK(std::memcmp(got.data(), widened.data(), got.size() * sizeof(float)) == 0);
      });
    }
  }
}

TEST_CASE("MatMul q8_0/q4_0 prefill covers the VNNI row groups and token passes", "[kernels]") {
  // AVX3_DL's int8 prefill packs 16 rows at a time, the last group masked, over passes of 8
  // tokens and a last one of 4 (tokens padded to a multiple of 4): 37 = 2 * 16 + 5 rows, rows
  // [5, 30) a group of 16 and one of 9, and T = 2, 9 (8 + 4 with 3 pad tokens), 12, 17.
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    for (bool raw : {false, true}) {
      const TestWeights w = MakeWeights(type, 37, 160, raw, 480);
      for (int64_t T : {2, 9, 12, 17}) {
        CheckMatMul(w, T, 0, 37, true);
        CheckMatMul(w, T, 5, 30, false);
        CheckMatMul(w, T, 36, 37, true);
      }
    }
  }
}

TEST_CASE("Int8-activation MatMul's block dots are exact integers on every target", "[kernels]") {
  // Scales that are powers of two (dw = 2^-6, dx = 2^-4) and x on the grid of dx make every
  // product and sum exact in f32 (|y| < 2^24 * 2^-10), so any path's result must be the exact
  // sum, bit for bit: an integer block dot off by one (a wrong offset for unsigned weight
  // bytes, say) would show, where the tolerance of CheckMatMul could hide it. Every int8 weight
  // and nibble value occurs; the activations' quants reach +-127.
  constexpr int64_t kRows = 37, kCols = 256, kNb = kCols / 32;
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    TestWeights w = MakeWeights(type, kRows, kCols, true, 490);  // dense unused here
    const size_t block_bytes = type == TensorType::kQ8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
    const uint16_t dw_bits = 0x2400;  // 2^-6
    for (int64_t i = 0; i < kRows * kNb; ++i) std::memcpy(&w.bytes[i * block_bytes], &dw_bits, 2);
    std::vector<int> qw(kRows * kCols);  // the integer weights: Q8_0 qs, Q4_0 nibble - 8
    for (int64_t i = 0; i < kRows * kCols; ++i) {
      const uint8_t* block = &w.bytes[(i / 32) * block_bytes];
      const int j = static_cast<int>(i % 32);
      qw[i] = type == TensorType::kQ8_0 ? static_cast<int8_t>(block[2 + j])
                                        : (j < 16 ? block[2 + j] & 15 : block[2 + j - 16] >> 4) - 8;
    }
    for (int64_t T : {1, 2, 5, 9, 12}) {
      std::mt19937 rng(491 + static_cast<uint32_t>(T));
      std::uniform_int_distribution<int> k(-127, 127);
      std::vector<float> x(T * kCols);
      for (int64_t i = 0; i < T * kCols; ++i) {
        const int64_t block = i / 32;
        // Each block's first element sets max |x| = 127 / 16; every fifth block is all zeros.
        const int q = block % 5 == 4 ? 0 : i % 32 == 0 ? (block % 2 ? 127 : -127) : k(rng);
        x[i] = static_cast<float>(q) / 16.0f;
      }
      std::vector<float> want(T * kRows);
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t r = 0; r < kRows; ++r) {
          double sum = 0;
          for (int64_t c = 0; c < kCols; ++c) {
            sum += static_cast<double>(qw[r * kCols + c]) * (x[t * kCols + c] * 16.0);
          }
          want[t * kRows + r] = static_cast<float>(sum / 1024.0);
        }
      }
      for (QuantActivations act : {QuantActivations::kInt8, QuantActivations::kFloat}) {
        std::vector<float> ref(T * kRows);
        reference::MatMul(x.data(), T, w.View(), nullptr, ref.data(), 0, kRows, act);
        CHECK(ref == want);
        ForEachTarget([&] {
          ForEachInt8DotPath([&] {
            INFO(TypeName(type) << " T " << T << " act " << static_cast<int>(act));
            std::vector<float> got(T * kRows);
            MatMul(x.data(), T, w.View(), nullptr, got.data(), 0, kRows, act);
            CHECK(got == want);
          });
        });
      }
    }
  }
}

// Around 4, 8 and 16 lanes, a GPT-2 width and a long odd length.
const std::vector<int64_t> kAwkwardLengths = {1,  2,  3,  4,  5,  7,   8,   9,
                                              15, 16, 17, 31, 33, 768, 4097};

TEST_CASE("LayerNorm matches the scalar twin", "[kernels]") {
  for (int64_t n : kAwkwardLengths) {
    INFO("n " << n);
    const std::vector<float> x = RandomVector(n, 1, 2.0f, 4.0f);  // mean ~3: tests centring
    const std::vector<float> gamma = RandomVector(n, 2, 0.5f, 2.0f);
    const std::vector<float> beta = RandomVector(n, 3);
    std::vector<float> want(n);
    reference::LayerNorm(x.data(), gamma.data(), beta.data(), 1e-5f, n, want.data());
    ForEachTarget([&] {
      std::vector<float> got(n), in_place = x;
      LayerNorm(x.data(), gamma.data(), beta.data(), 1e-5f, n, got.data());
      LayerNorm(in_place.data(), gamma.data(), beta.data(), 1e-5f, n, in_place.data());
      int bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (!Near(got[i], want[i], kLayerNormAbsTol, kLayerNormRelTol)) ++bad;
        if (in_place[i] != got[i]) ++bad;
      }
      CHECK(bad == 0);
    });
  }
}

TEST_CASE("Gelu matches the scalar twin", "[kernels]") {
  for (int64_t n : kAwkwardLengths) {
    INFO("n " << n);
    std::vector<float> x = RandomVector(n, 4, -12.0f, 12.0f);
    const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 50.0f, -50.0f, 3e38f, -3e38f, -9.0f};
    for (size_t i = 0; i < std::size(specials) && static_cast<int64_t>(i) < n; ++i) {
      x[i * 7 % n] = specials[i];
    }
    std::vector<float> want = x;
    reference::Gelu(want.data(), n);
    ForEachTarget([&] {
      std::vector<float> got = x;
      Gelu(got.data(), n);
      int bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (!Near(got[i], want[i], kGeluAbsTol, kGeluRelTol)) {
          if (bad < 3) {
            INFO("x " << x[i] << " got " << got[i] << " want " << want[i]);
            CHECK(false);
          }
          ++bad;
        }
      }
      CHECK(bad == 0);
    });
  }
}

TEST_CASE("Softmax matches the scalar twin", "[kernels]") {
  for (int64_t n : kAwkwardLengths) {
    INFO("n " << n);
    std::vector<float> x = RandomVector(n, 5, -20.0f, 20.0f);
    if (n > 2) x[n / 2] = -std::numeric_limits<float>::infinity();  // masked entry
    std::vector<float> want = x;
    reference::Softmax(want.data(), n);
    ForEachTarget([&] {
      std::vector<float> got = x;
      Softmax(got.data(), n);
      int bad = 0;
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (!Near(got[i], want[i], kProbAbsTol, kProbRelTol)) ++bad;
        sum += got[i];
      }
      CHECK(bad == 0);
      CHECK(sum == Approx(1.0).margin(1e-5));
    });
  }
}

// NaN inputs (a model file with NaN weights) reach Highway's Exp, whose float -> int32 step is
// undefined for NaN on EMU128; ops::ExpKeepNaN keeps NaN away from it. Every target must then
// agree with the scalar twin: NaN out wherever it is NaN.
TEST_CASE("Softmax and Gelu of NaN inputs give the scalar twin's NaNs", "[kernels]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : kAwkwardLengths) {
    INFO("n " << n);
    std::vector<float> x = RandomVector(n, 8, -20.0f, 20.0f);
    for (int64_t i = 0; i < n; i += 3) x[i] = nan;
    std::vector<float> want_softmax = x, want_gelu = x;
    reference::Softmax(want_softmax.data(), n);
    reference::Gelu(want_gelu.data(), n);
    ForEachTarget([&] {
      std::vector<float> softmax = x, gelu = x;
      Softmax(softmax.data(), n);
      Gelu(gelu.data(), n);
      int bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(softmax[i]) != std::isnan(want_softmax[i])) ++bad;
        if (std::isnan(gelu[i]) != std::isnan(want_gelu[i])) ++bad;
        if (!std::isnan(want_gelu[i]) && !Near(gelu[i], want_gelu[i], kGeluAbsTol, kGeluRelTol))
          ++bad;
      }
      CHECK(bad == 0);
    });
  }
}

TEST_CASE("AddInPlace matches the scalar twin exactly", "[kernels]") {
  for (int64_t n : kAwkwardLengths) {
    INFO("n " << n);
    const std::vector<float> x = RandomVector(n, 6);
    const std::vector<float> y0 = RandomVector(n, 7);
    std::vector<float> want = y0;
    reference::AddInPlace(want.data(), x.data(), n);
    ForEachTarget([&] {
      std::vector<float> got = y0;
      AddInPlace(got.data(), x.data(), n);
      CHECK(got == want);
    });
  }
}

// Scores, probabilities and output values of an AttentionHead call outside the tolerances
// against the scalar twin's.
int AttentionMismatches(const std::vector<float>& scores, const std::vector<float>& probs,
                        const std::vector<float>& out, const std::vector<float>& want_scores,
                        const std::vector<float>& want_probs, const std::vector<float>& want_out) {
  int bad = 0;
  for (size_t j = 0; j < scores.size(); ++j) {
    if (!Near(scores[j], want_scores[j], kScoreAbsTol, kScoreRelTol)) ++bad;
    if (!Near(probs[j], want_probs[j], kProbAbsTol, kProbRelTol)) ++bad;
  }
  for (size_t d = 0; d < out.size(); ++d) {
    if (!Near(out[d], want_out[d], kAttentionOutAbsTol, 0.0)) ++bad;
  }
  return bad;
}

TEST_CASE("AttentionHead matches the scalar twin", "[kernels]") {
  for (int64_t head_dim : {1, 3, 4, 5, 17, 33, 64, 65}) {
    for (int64_t n_keys : {1, 2, 3, 4, 5, 7, 8, 9, 33, 100, 1000, 1001}) {  // 4-key groups + rest
      INFO("head_dim " << head_dim << " n_keys " << n_keys);
      const int64_t stride = 3 * head_dim + 1;  // keys and values interleaved like a qkv buffer
      const std::vector<float> q = RandomVector(head_dim, 8, -2.0f, 2.0f);
      const std::vector<float> kv = RandomVector(n_keys * stride + head_dim, 9, -2.0f, 2.0f);
      const float* k = kv.data();
      const float* v = kv.data() + head_dim;
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      std::vector<float> want_scores(n_keys), want_probs(n_keys), want_out(head_dim);
      reference::AttentionHead(q.data(), k, v, stride, n_keys, head_dim, scale, want_scores.data(),
                               want_probs.data(), want_out.data());
      ForEachTarget([&] {
        std::vector<float> scores(n_keys), probs(n_keys), out(head_dim), out2(head_dim);
        AttentionHead(q.data(), k, v, stride, n_keys, head_dim, scale, scores.data(), probs.data(),
                      out.data());
        const int bad = AttentionMismatches(scores, probs, out, want_scores, want_probs, want_out);
        // Without the scores buffer the result is the same.
        AttentionHead(q.data(), k, v, stride, n_keys, head_dim, scale, nullptr, probs.data(),
                      out2.data());
        CHECK(out2 == out);
        CHECK(bad == 0);
      });
    }
  }
}

// f16 bits of x, and x rounded to f16 and back.
void ToHalves(const std::vector<float>& x, std::vector<uint16_t>& bits, std::vector<float>& back) {
  bits.resize(x.size());
  back.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    bits[i] = F32ToF16(x[i]);
    back[i] = F16ToF32(bits[i]);
  }
}

TEST_CASE("AttentionHead on f16 keys and values matches the scalar twin and the f32 call",
          "[kernels]") {
  for (int64_t head_dim : {1, 3, 4, 5, 17, 33, 64, 65}) {
    for (int64_t n_keys : {1, 2, 3, 4, 5, 7, 8, 9, 33, 100, 1000, 1001}) {
      INFO("head_dim " << head_dim << " n_keys " << n_keys);
      const int64_t stride = 3 * head_dim + 1;
      const std::vector<float> q = RandomVector(head_dim, 8, -2.0f, 2.0f);
      std::vector<float> kv_f32 = RandomVector(n_keys * stride + head_dim, 9, -2.0f, 2.0f);
      for (size_t i = 0; i < kv_f32.size(); i += 7) kv_f32[i] *= 1e-5f;  // f16 subnormals
      std::vector<uint16_t> kv;
      std::vector<float> decoded;
      ToHalves(kv_f32, kv, decoded);
      // Beyond the twin's tolerances: values near the top of f16's range, checked for bits only.
      std::vector<float> big_f32 = kv_f32;
      for (size_t i = 3; i < big_f32.size(); i += 11) big_f32[i] *= 3e4f;
      std::vector<uint16_t> big;
      std::vector<float> big_decoded;
      ToHalves(big_f32, big, big_decoded);
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      std::vector<float> want_scores(n_keys), want_probs(n_keys), want_out(head_dim);
      reference::AttentionHead(q.data(), kv.data(), kv.data() + head_dim, stride, n_keys, head_dim,
                               scale, want_scores.data(), want_probs.data(), want_out.data());
      ForEachTarget([&] {
        std::vector<float> scores(n_keys), probs(n_keys), out(head_dim);
        AttentionHead(q.data(), kv.data(), kv.data() + head_dim, stride, n_keys, head_dim, scale,
                      scores.data(), probs.data(), out.data());
        const int bad = AttentionMismatches(scores, probs, out, want_scores, want_probs, want_out);
        CHECK(bad == 0);
        // The f32 kernel on the decoded keys and values gives the same bits: the 2^112 folded
        // into the query and the probabilities changes no product.
        for (int pass = 0; pass < 2; ++pass) {
          const uint16_t* halves = pass == 0 ? kv.data() : big.data();
          const float* floats = pass == 0 ? decoded.data() : big_decoded.data();
          std::vector<float> scores16(n_keys), probs16(n_keys), out16(head_dim);
          std::vector<float> scores32(n_keys), probs32(n_keys), out32(head_dim);
          AttentionHead(q.data(), halves, halves + head_dim, stride, n_keys, head_dim, scale,
                        scores16.data(), probs16.data(), out16.data());
          AttentionHead(q.data(), floats, floats + head_dim, stride, n_keys, head_dim, scale,
                        scores32.data(), probs32.data(), out32.data());
          CHECK(scores16 == scores32);
          CHECK(probs16 == probs32);
          CHECK(out16 == out32);
        }
      });
    }
  }
}

// ---- The 8-bit KV cache ---------------------------------------------------------------------

// A head's cache of `capacity` positions in kernels.h's 8-bit layouts, written row by row.
struct CacheQ8 {
  CacheQ8(int64_t head_dim, int64_t capacity)
      : head_dim(head_dim),
        capacity(capacity),
        nb(KvBlocks(head_dim)),
        kq(static_cast<size_t>(capacity * nb * kKvBlock), 99),
        vq(kq.size(), 99),
        kd(static_cast<size_t>(nb * capacity), 0x3c00),
        vd(kd.size(), 0x3c00) {}
  void Store(int64_t j, const float* k, const float* v) {
    StoreKeyQ8(k, head_dim, j, kq.data(), kd.data(), capacity);
    StoreValueQ8(v, head_dim, j, vq.data(), vd.data(), capacity);
  }
  KvHeadQ8 keys() const { return {kq.data(), kd.data(), capacity}; }
  KvHeadQ8 values() const { return {vq.data(), vd.data(), capacity}; }
  int8_t KeyQuant(int64_t j, int64_t i) const {
    return kq[static_cast<size_t>((j * nb + i / kKvBlock) * kKvBlock + i % kKvBlock)];
  }
  int8_t ValueQuant(int64_t j, int64_t i) const {
    return vq[static_cast<size_t>((i / kKvBlock * capacity + j - j % 2) * kKvBlock +
                                  2 * (i % kKvBlock) + j % 2)];
  }
  float KeyScale(int64_t j, int64_t i) const { return F16ToF32(kd[(i / kKvBlock) * capacity + j]); }
  float ValueScale(int64_t j, int64_t i) const {
    return F16ToF32(vd[(i / kKvBlock) * capacity + j]);
  }
  int64_t head_dim, capacity, nb;
  std::vector<int8_t> kq, vq;
  std::vector<uint16_t> kd, vd;
};

TEST_CASE("The 8-bit KV cache rounds each row as QuantizeRowQ8_0, in its layouts", "[kernels]") {
  ForEachTarget([] {
    for (int64_t head_dim : {1, 5, 16, 32, 40, 64, 65}) {
      INFO("head_dim " << head_dim);
      const int64_t nb = KvBlocks(head_dim), capacity = 8;
      CacheQ8 cache(head_dim, capacity);
      std::vector<std::vector<float>> rows;
      for (int64_t j = 0; j < capacity; ++j) {
        std::vector<float> row = RandomVector(head_dim, 40 + static_cast<uint32_t>(j), -3.0f, 3.0f);
        if (j == 3) std::fill(row.begin(), row.end(), 0.0f);
        if (j == 4) row[0] = 0.5f * 127 / 3;  // a .5 tie: halves round away from zero, as ggml
        if (j == 5) {  // a subnormal scale, whose reciprocal overflows: quants +127 and -128
          for (float& x : row) x *= 1e-39f;
        }
        rows.push_back(row);
        std::vector<float> v = row;
        for (float& x : v) x = -x;
        cache.Store(j, row.data(), v.data());
      }
      for (int64_t j = 0; j < capacity; ++j) {
        for (int64_t b = 0; b < nb; ++b) {
          // ggml's quantizer on the block, padded with zeros to 32.
          float padded[32] = {}, negated[32] = {};
          const int64_t width = std::min<int64_t>(32, head_dim - 32 * b);
          for (int64_t c = 0; c < width; ++c) {
            padded[c] = rows[j][32 * b + c];
            negated[c] = -padded[c];
          }
          BlockQ8_0 want, want_v;
          QuantizeRowQ8_0(padded, &want, 32);
          QuantizeRowQ8_0(negated, &want_v, 32);
          CHECK(cache.kd[b * capacity + j] == want.d);
          CHECK(cache.vd[b * capacity + j] == want_v.d);
          for (int64_t c = 0; c < 32; ++c) {
            const int64_t i = 32 * b + c;
            // Past head_dim: the short block's unused quants, written as zeros.
            const int8_t key = cache.kq[(j * nb + b) * 32 + c];
            const int8_t value = cache.vq[(b * capacity + j - j % 2) * 32 + 2 * c + j % 2];
            CHECK(int{key} == int{i < head_dim ? want.qs[c] : int8_t{0}});
            CHECK(int{value} == int{i < head_dim ? want_v.qs[c] : int8_t{0}});
          }
        }
      }
    }
    // The two rules that keep the cache finite.
    std::vector<float> row = RandomVector(64, 50);
    row[3] = 1e7f;                                      // block 0: the scale saturates at 65504
    row[40] = std::numeric_limits<float>::quiet_NaN();  // block 1: zeros
    CacheQ8 cache(64, 2);
    cache.Store(1, row.data(), row.data());
    CHECK(cache.kd[1] == 0x7bff);
    CHECK(cache.vd[1] == 0x7bff);
    CHECK(cache.KeyQuant(1, 3) == 127);
    CHECK(cache.kd[2 + 1] == 0);
    CHECK(cache.vd[2 + 1] == 0);
    for (int64_t i = 32; i < 64; ++i) {
      CHECK(cache.KeyQuant(1, i) == 0);
      CHECK(cache.ValueQuant(1, i) == 0);
    }
    row[40] = std::numeric_limits<float>::infinity();
    cache.Store(0, row.data(), row.data());
    CHECK(cache.kd[2] == 0);
    // Writing value 0 left value 1, its partner in the pair, as it was.
    CHECK(cache.ValueQuant(1, 3) == 127);
  });
}

// Keys and values of n_keys positions: a cache of more positions than are read, the rest
// holding rows that must not count.
struct AttentionCase {
  AttentionCase(int64_t head_dim, int64_t n_keys, uint32_t seed, float range = 2.0f)
      : cache(head_dim, (n_keys + 3) / 2 * 2),
        k(RandomVector(cache.capacity * head_dim, seed, -range, range)),
        v(RandomVector(cache.capacity * head_dim, seed + 1, -range, range)) {
    for (int64_t j = 0; j < cache.capacity; ++j) {
      cache.Store(j, k.data() + j * head_dim, v.data() + j * head_dim);
    }
  }
  CacheQ8 cache;
  std::vector<float> k, v;
};

TEST_CASE("AttentionHead on the 8-bit cache matches the scalar twin", "[kernels]") {
  for (int64_t head_dim : {1, 5, 16, 33, 64, 65}) {
    for (int64_t n_keys : {1, 2, 3, 4, 5, 7, 8, 9, 33, 100, 511, 512, 513, 1000, 1001, 1030}) {
      INFO("head_dim " << head_dim << " n_keys " << n_keys);
      const AttentionCase c(head_dim, n_keys, 60);
      const std::vector<float> q = RandomVector(head_dim, 8, -2.0f, 2.0f);
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      std::vector<float> want_scores(n_keys), want_probs(n_keys), want_out(head_dim);
      reference::AttentionHead(q.data(), c.cache.keys(), c.cache.values(), n_keys, head_dim, scale,
                               want_scores.data(), want_probs.data(), want_out.data());
      ForEachTarget([&] {
        std::vector<float> scores(n_keys), probs(n_keys), out(head_dim);
        AttentionHead(q.data(), c.cache.keys(), c.cache.values(), n_keys, head_dim, scale,
                      scores.data(), probs.data(), out.data());
        // The scores are exact integer sums and the same float steps: the twin's bits.
        CHECK(scores == want_scores);
        const int bad = AttentionMismatches(scores, probs, out, want_scores, want_probs, want_out);
        CHECK(bad == 0);
        // Without the value sum (the capture store's call): the same scores and probabilities.
        std::vector<float> scores2(n_keys), probs2(n_keys);
        AttentionHead(q.data(), c.cache.keys(), KvHeadQ8{}, n_keys, head_dim, scale, scores2.data(),
                      probs2.data(), nullptr);
        CHECK(scores2 == scores);
        CHECK(probs2 == probs);
      });
    }
  }
}

TEST_CASE("AttentionHead on the 8-bit cache stays within its rounding of the f32 attention",
          "[kernels]") {
  const int64_t head_dim = 64;
  for (int64_t n_keys : {1, 7, 64, 1000}) {
    INFO("n_keys " << n_keys);
    const AttentionCase c(head_dim, n_keys, 70, 3.0f);
    const std::vector<float> q = RandomVector(head_dim, 9, -3.0f, 3.0f);
    const float scale = 0.125f;
    std::vector<float> scores(n_keys), probs(n_keys), out(head_dim);
    AttentionHead(q.data(), c.cache.keys(), c.cache.values(), n_keys, head_dim, scale,
                  scores.data(), probs.data(), out.data());
    // Scores: the f32 dot of the unrounded query and key, within the bound their roundings
    // allow (each number within half its block's step d of the original).
    float q_step[2];
    for (int b = 0; b < 2; ++b) {
      BlockQ8_0 block;
      QuantizeRowQ8_0(q.data() + 32 * b, &block, 32);
      q_step[b] = F16ToF32(block.d);
    }
    for (int64_t j = 0; j < n_keys; ++j) {
      double exact = 0, bound = 0;
      for (int64_t i = 0; i < head_dim; ++i) {
        const double x = q[i], y = c.k[j * head_dim + i];
        const double dq = 0.5 * q_step[i / 32] + 1e-6, dk = 0.5 * c.cache.KeyScale(j, i) + 1e-6;
        exact += x * y;
        bound += std::fabs(x) * dk + std::fabs(y) * dq + dq * dk;
      }
      CHECK(std::fabs(scores[j] - scale * exact) <= scale * bound + 1e-5);
    }
    // Values: the probabilities times the decoded values, within what 15-bit weights change
    // (half a step of W / 32767 per key and element).
    float W = 0;
    for (int64_t j = 0; j < n_keys; ++j) {
      for (int64_t i = 0; i < head_dim; i += 32)
        W = std::max(W, probs[j] * c.cache.ValueScale(j, i));
    }
    for (int64_t i = 0; i < head_dim; ++i) {
      double want = 0, quants = 0;
      for (int64_t j = 0; j < n_keys; ++j) {
        want += static_cast<double>(probs[j]) * c.cache.ValueScale(j, i) * c.cache.ValueQuant(j, i);
        quants += std::abs(c.cache.ValueQuant(j, i));
      }
      CHECK(std::fabs(out[i] - want) <= 0.5 * W / 32767 * quants + 1e-6 * (1 + std::fabs(want)));
    }
  }
}

TEST_CASE("AttentionHead's 8-bit value sum does not overflow at long contexts", "[kernels]") {
  // Every key alike and every value element at +-127 of one scale: all probabilities equal, so
  // every weight is the largest (32767), and the sum over 4000 keys is 2^34 in integers.
  const int64_t head_dim = 64, n_keys = 4000;
  CacheQ8 cache(head_dim, n_keys);
  std::vector<float> k(head_dim, 1.0f), v(head_dim);
  for (int64_t i = 0; i < head_dim; ++i) v[i] = i % 2 ? -4.0f : 4.0f;
  for (int64_t j = 0; j < n_keys; ++j) cache.Store(j, k.data(), v.data());
  REQUIRE(cache.ValueQuant(5, 0) == 127);
  const std::vector<float> q = RandomVector(head_dim, 10);
  ForEachTarget([&] {
    std::vector<float> probs(n_keys), out(head_dim);
    AttentionHead(q.data(), cache.keys(), cache.values(), n_keys, head_dim, 0.125f, nullptr,
                  probs.data(), out.data());
    for (int64_t i = 0; i < head_dim; ++i) {
      const float decoded = cache.ValueScale(0, i) * cache.ValueQuant(0, i);  // 4 in f16's d
      CHECK(std::fabs(out[i] - decoded) <= 1e-6f);
    }
  });
}

}  // namespace
}  // namespace gpt2
