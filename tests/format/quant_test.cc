// Q8_0 / Q4_0 reference quantization: block layout, error budgets, and bit-exactness against a
// straightforward transcription of ggml-quants.c's quantize_row_q8_0_ref / quantize_row_q4_0_ref
// written here with the naive half encoder from reference_half.h.
#include "format/quant.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "format/f16.h"
#include "format/tensor_type.h"
#include "reference_half.h"

namespace {

using gpt2::BlockQ4_0;
using gpt2::BlockQ8_0;
using gpt2::TensorType;

// ggml-common.h: block_q8_0 = { ggml_half d; int8_t qs[32]; }, block_q4_0 = { ggml_half d;
// uint8_t qs[16]; }, packed without padding, scale first.
static_assert(gpt2::kQK8_0 == 32 && gpt2::kQK4_0 == 32, "ggml QK8_0 / QK4_0 are 32");
static_assert(sizeof(BlockQ8_0) == 34, "block_q8_0 is 34 bytes");
static_assert(sizeof(BlockQ4_0) == 18, "block_q4_0 is 18 bytes");
static_assert(offsetof(BlockQ8_0, qs) == 2 && offsetof(BlockQ4_0, qs) == 2, "scale comes first");
static_assert(alignof(BlockQ8_0) == 2 && alignof(BlockQ4_0) == 2,
              "blocks must sit at any even offset of a mapped file");

// Error budgets, per element, as a fraction of the block's largest magnitude amax.
// Q8_0: rounding to the step d = amax/127 costs <= d/2; storing d as f16 (relative error
// <= 2^-11) moves the largest quant (127) by <= amax * 2^-11. Total <= amax * 0.00443.
constexpr double kMaxQ8_0RelError = 0.5 / 127 + 1.0 / 2048 + 1e-6;
// Q4_0: d = amax/8 in magnitude; values on the side of the largest magnitude round to <= d/2,
// but the opposite side only reaches 7d, so a value of amax there is off by up to d = amax/8.
// Plus the f16 scale error on 8 steps.
constexpr double kMaxQ4_0RelError = 1.0 / 8 + 8.0 / 8 / 2048 + 1e-6;
// RMS error over Gaussian data, relative to the data's RMS (ggml's test-quantize-fns uses
// similar whole-row budgets). Expected: step/sqrt(12) with step ~ 2.5 sigma / 127 (Q8_0) and
// ~ 2.5 sigma / 8 (Q4_0): ~0.006 and ~0.09.
constexpr double kMaxQ8_0RmsRelError = 0.008;
constexpr double kMaxQ4_0RmsRelError = 0.11;

// --- Straightforward transcription of ggml's reference quantizers (ggml-quants.c). ---

void NaiveQuantizeQ8_0(const float* x, uint8_t* out, int n) {  // out: n/32 blocks of 34 bytes
  for (int i = 0; i < n / 32; ++i) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[i * 32 + j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    const uint16_t dh = gpt2_test::RefFloatToHalf(d);
    uint8_t* block = out + i * 34;
    block[0] = static_cast<uint8_t>(dh & 0xff);  // little-endian f16
    block[1] = static_cast<uint8_t>(dh >> 8);
    for (int j = 0; j < 32; ++j) {
      const int8_t q = static_cast<int8_t>(roundf(x[i * 32 + j] * id));
      std::memcpy(block + 2 + j, &q, 1);
    }
  }
}

void NaiveQuantizeQ4_0(const float* x, uint8_t* out, int n) {  // out: n/32 blocks of 18 bytes
  for (int i = 0; i < n / 32; ++i) {
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float v = x[i * 32 + j];
      if (amax < std::fabs(v)) {
        amax = std::fabs(v);
        max = v;
      }
    }
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    const uint16_t dh = gpt2_test::RefFloatToHalf(d);
    uint8_t* block = out + i * 18;
    block[0] = static_cast<uint8_t>(dh & 0xff);
    block[1] = static_cast<uint8_t>(dh >> 8);
    for (int j = 0; j < 16; ++j) {
      const float x0 = x[i * 32 + j] * id;
      const float x1 = x[i * 32 + 16 + j] * id;
      const uint8_t xi0 = std::min<int>(15, static_cast<int8_t>(x0 + 8.5f));
      const uint8_t xi1 = std::min<int>(15, static_cast<int8_t>(x1 + 8.5f));
      block[2 + j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

// Test inputs: 32-element blocks of several kinds, concatenated.
std::vector<float> MakeTestRow(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> x;
  auto add_block = [&](auto gen) {
    for (int j = 0; j < 32; ++j) x.push_back(gen(j));
  };
  for (int b = 0; b < 64; ++b) add_block([&](int) { return gauss(rng); });
  for (int b = 0; b < 16; ++b)
    add_block([&](int) { return uni(rng) * 0.02f; });                 // GPT-2 weight scale
  add_block([](int) { return 0.0f; });                                // all zero: d = 0, id = 0
  add_block([](int j) { return j == 5 ? -3.0f : 0.0f; });             // single negative max
  add_block([](int j) { return j == 30 ? 7.5f : 0.25f * (j % 7); });  // positive max, late
  add_block([](int j) { return j == 3 ? 2.0f : (j == 9 ? -2.0f : 0.1f * j); });  // |max| tie
  add_block([](int j) { return static_cast<float>(j - 16); });                   // integer ramp
  add_block([](int j) { return (j - 16) * 0.5f; });    // half-integer ramp
  add_block([&](int) { return gauss(rng) * 1e-6f; });  // d is an f16 subnormal
  add_block([&](int) { return gauss(rng) * 1e-9f; });  // d underflows to 0 in f16
  add_block([&](int) { return gauss(rng) * 1e4f; });   // large values
  add_block([&](int) { return gauss(rng) * 4e6f; });   // d overflows f16 to inf
  return x;
}

template <typename Block>
std::vector<uint8_t> AsBytes(const std::vector<Block>& blocks) {
  std::vector<uint8_t> bytes(blocks.size() * sizeof(Block));
  std::memcpy(bytes.data(), blocks.data(), bytes.size());
  return bytes;
}

// Largest |x - y| per block divided by the block's amax, and RMS error / RMS of x.
void Errors(const std::vector<float>& x, const std::vector<float>& y, int n_blocks, double* max_rel,
            double* rms_rel) {
  *max_rel = 0;
  double se = 0, sx = 0;
  for (int b = 0; b < n_blocks; ++b) {
    double amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(double(x[b * 32 + j])));
    for (int j = 0; j < 32; ++j) {
      const double e = std::fabs(double(x[b * 32 + j]) - double(y[b * 32 + j]));
      if (amax > 0) *max_rel = std::max(*max_rel, e / amax);
      se += e * e;
      sx += double(x[b * 32 + j]) * double(x[b * 32 + j]);
    }
  }
  *rms_rel = std::sqrt(se / sx);
}

}  // namespace

TEST_CASE("Type table matches ggml", "[format]") {
  CHECK(gpt2::TypeBlockSize(TensorType::kF32) == 1);
  CHECK(gpt2::TypeBlockSize(TensorType::kF16) == 1);
  CHECK(gpt2::TypeBlockSize(TensorType::kQ8_0) == gpt2::kQK8_0);
  CHECK(gpt2::TypeBlockSize(TensorType::kQ4_0) == gpt2::kQK4_0);
  CHECK(gpt2::TypeBlockBytes(TensorType::kF32) == 4);
  CHECK(gpt2::TypeBlockBytes(TensorType::kF16) == 2);
  CHECK(gpt2::TypeBlockBytes(TensorType::kQ8_0) == sizeof(BlockQ8_0));
  CHECK(gpt2::TypeBlockBytes(TensorType::kQ4_0) == sizeof(BlockQ4_0));
  CHECK(gpt2::RowBytes(TensorType::kF32, 768) == 3072);
  CHECK(gpt2::RowBytes(TensorType::kF16, 768) == 1536);
  CHECK(gpt2::RowBytes(TensorType::kQ8_0, 768) == 24 * 34);
  CHECK(gpt2::RowBytes(TensorType::kQ4_0, 768) == 24 * 18);

  // Names as ggml's type_traits spell them (ggml.c), by id.
  CHECK(std::string(gpt2::GgmlTypeName(0)) == "f32");
  CHECK(std::string(gpt2::GgmlTypeName(1)) == "f16");
  CHECK(std::string(gpt2::GgmlTypeName(2)) == "q4_0");
  CHECK(std::string(gpt2::GgmlTypeName(3)) == "q4_1");
  CHECK(std::string(gpt2::GgmlTypeName(6)) == "q5_0");
  CHECK(std::string(gpt2::GgmlTypeName(7)) == "q5_1");
  CHECK(std::string(gpt2::GgmlTypeName(8)) == "q8_0");
  CHECK(std::string(gpt2::GgmlTypeName(9)) == "q8_1");
  CHECK(std::string(gpt2::GgmlTypeName(10)) == "q2_K");
  CHECK(std::string(gpt2::GgmlTypeName(12)) == "q4_K");
  CHECK(std::string(gpt2::GgmlTypeName(14)) == "q6_K");
  CHECK(std::string(gpt2::GgmlTypeName(15)) == "q8_K");
  CHECK(std::string(gpt2::GgmlTypeName(16)) == "iq2_xxs");
  CHECK(std::string(gpt2::GgmlTypeName(23)) == "iq4_xs");
  CHECK(std::string(gpt2::GgmlTypeName(24)) == "i8");
  CHECK(std::string(gpt2::GgmlTypeName(27)) == "i64");
  CHECK(std::string(gpt2::GgmlTypeName(28)) == "f64");
  CHECK(std::string(gpt2::GgmlTypeName(29)) == "iq1_m");
  CHECK(std::string(gpt2::GgmlTypeName(30)) == "bf16");
  CHECK(std::string(gpt2::GgmlTypeName(34)) == "tq1_0");
  CHECK(std::string(gpt2::GgmlTypeName(35)) == "tq2_0");
  CHECK(std::string(gpt2::GgmlTypeName(39)) == "mxfp4");
  CHECK(std::string(gpt2::GgmlTypeName(1000)) == "unknown");

  int supported = 0;
  for (uint32_t id = 0; id < 64; ++id) supported += gpt2::IsSupportedType(id) ? 1 : 0;
  CHECK(supported == 4);
  CHECK(gpt2::IsSupportedType(0));
  CHECK(gpt2::IsSupportedType(1));
  CHECK(gpt2::IsSupportedType(2));
  CHECK(gpt2::IsSupportedType(8));
  CHECK_FALSE(gpt2::IsSupportedType(12));
  CHECK_FALSE(gpt2::IsSupportedType(0xffffffffu));
}

TEST_CASE("Q4_0 worked example: an integer ramp", "[format]") {
  // x[j] = j - 16: the largest magnitude is -16 (first), so d = -16 / -8 = 2 and id = 0.5;
  // nibble = trunc((j - 16) / 2 + 8.5) = trunc(j / 2 + 0.5), capped at 15.
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  BlockQ4_0 b;
  gpt2::QuantizeRowQ4_0(x, &b, 32);
  CHECK(b.d == 0x4000);  // 2.0 in f16
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, (j + 1) / 2);
    const int hi = std::min(15, (j + 16 + 1) / 2);
    CHECK((b.qs[j] & 0x0f) == lo);
    CHECK((b.qs[j] >> 4) == hi);
  }
  float y[32];
  gpt2::DequantizeRowQ4_0(&b, y, 32);
  CHECK(y[0] == -16.0f);  // (0 - 8) * 2
  CHECK(y[31] == 14.0f);  // (15 - 8) * 2: the positive side is capped at +7 steps
}

TEST_CASE("Q8_0 and Q4_0 quantization is bit-exact with ggml's reference", "[format]") {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<float> x = MakeTestRow(seed);
    const int n = static_cast<int>(x.size());
    REQUIRE(n % 32 == 0);

    std::vector<BlockQ8_0> q8(n / 32);
    gpt2::QuantizeRowQ8_0(x.data(), q8.data(), n);
    std::vector<uint8_t> want8(q8.size() * 34);
    NaiveQuantizeQ8_0(x.data(), want8.data(), n);
    CHECK(AsBytes(q8) == want8);

    std::vector<BlockQ4_0> q4(n / 32);
    gpt2::QuantizeRowQ4_0(x.data(), q4.data(), n);
    std::vector<uint8_t> want4(q4.size() * 18);
    NaiveQuantizeQ4_0(x.data(), want4.data(), n);
    CHECK(AsBytes(q4) == want4);
  }
}

// QuantizeRowQ8_0 rounds without calling roundf; this sweeps the rounding over ties and their
// neighbours against the roundf of the transcription above. Each block's first value 127/64
// makes d = 2^-6 and id = 64 exactly, so x * id = v exactly for the block's other values v / 64.
TEST_CASE("Q8_0 quantization rounds like roundf at ties and their neighbours", "[format]") {
  std::vector<float> v;
  for (int k = -128; k <= 127; ++k) {
    const float tie = static_cast<float>(k) + 0.5f;
    for (float c : {tie, static_cast<float>(k)}) {
      v.push_back(c);
      v.push_back(std::nextafter(c, 1000.0f));
      v.push_back(std::nextafter(c, -1000.0f));
    }
  }
  for (float c : {0.0f, -0.0f, 0.49999997f, -0.49999997f, 1e-30f, -1e-30f, 1.5e-45f}) {
    v.push_back(c);
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-127.0f, 127.0f);
  for (int i = 0; i < 20000; ++i) v.push_back(uniform(rng));
  std::vector<float> x;
  for (size_t i = 0; i < v.size(); ++i) {
    if (x.size() % 32 == 0) x.push_back(127.0f / 64.0f);
    const float c = std::min(std::max(v[i], -127.0f), 127.0f);
    x.push_back(c / 64.0f);
  }
  while (x.size() % 32 != 0) x.push_back(0.0f);
  const int n = static_cast<int>(x.size());
  std::vector<BlockQ8_0> q8(n / 32);
  gpt2::QuantizeRowQ8_0(x.data(), q8.data(), n);
  std::vector<uint8_t> want(q8.size() * 34);
  NaiveQuantizeQ8_0(x.data(), want.data(), n);
  CHECK(AsBytes(q8) == want);
  // The ties themselves go away from zero: 0.5 -> 1, -0.5 -> -1, 126.5 -> 127.
  const float ties[3] = {0.5f, -0.5f, 126.5f};
  const int8_t rounded[3] = {1, -1, 127};
  for (int i = 0; i < 3; ++i) {
    float row[32] = {127.0f / 64.0f, ties[i] / 64.0f};
    BlockQ8_0 b;
    gpt2::QuantizeRowQ8_0(row, &b, 32);
    CHECK(b.qs[1] == rounded[i]);
  }
}

TEST_CASE("Dequantization follows ggml: w = d * q and w = d * (nibble - 8)", "[format]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<BlockQ8_0> q8(4);
  std::vector<BlockQ4_0> q4(4);
  const uint16_t scales[4] = {0x3c00, 0x2e66, 0x8001, 0xc500};  // 1, 0.1, -tiny, -5
  for (int b = 0; b < 4; ++b) {
    q8[b].d = q4[b].d = scales[b];
    for (int j = 0; j < 32; ++j) q8[b].qs[j] = static_cast<int8_t>(byte(rng) - 128);
    for (int j = 0; j < 16; ++j) q4[b].qs[j] = static_cast<uint8_t>(byte(rng));
  }
  std::vector<float> y8(128), y4(128), any8(128), any4(128);
  gpt2::DequantizeRowQ8_0(q8.data(), y8.data(), 128);
  gpt2::DequantizeRowQ4_0(q4.data(), y4.data(), 128);
  gpt2::DequantizeRow(TensorType::kQ8_0, q8.data(), any8.data(), 128);
  gpt2::DequantizeRow(TensorType::kQ4_0, q4.data(), any4.data(), 128);
  for (int b = 0; b < 4; ++b) {
    const double d = gpt2_test::RefHalfToDouble(scales[b]);
    for (int j = 0; j < 32; ++j) {
      CHECK(y8[b * 32 + j] == static_cast<float>(d * q8[b].qs[j]));
      const int nibble = j < 16 ? (q4[b].qs[j] & 0x0f) : (q4[b].qs[j - 16] >> 4);
      CHECK(y4[b * 32 + j] == static_cast<float>(d * (nibble - 8)));
    }
  }
  CHECK(any8 == y8);
  CHECK(any4 == y4);
}

TEST_CASE("DequantizeRow converts f32 and f16 rows, at odd byte offsets too", "[format]") {
  const float src[4] = {1.0f, -2.5f, 65504.0f, 1e-3f};
  float out[4];
  gpt2::DequantizeRow(TensorType::kF32, src, out, 4);
  CHECK(std::memcmp(out, src, sizeof(src)) == 0);

  // A half row stored one byte into a buffer (unaligned for uint16_t).
  uint8_t buf[9];
  const uint16_t halves[4] = {0x3c00, 0xc100, 0x7bff, 0x0001};
  std::memcpy(buf + 1, halves, sizeof(halves));
  gpt2::DequantizeRow(TensorType::kF16, buf + 1, out, 4);
  for (int k = 0; k < 4; ++k)
    CHECK(out[k] == static_cast<float>(gpt2_test::RefHalfToDouble(halves[k])));
}

TEST_CASE("Q8_0 and Q4_0 round trips stay within their error budgets", "[format]") {
  std::mt19937 rng(42);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  const int n = 32 * 1024;
  std::vector<float> x(n);
  for (float& v : x) v = gauss(rng) * 0.05f;

  std::vector<BlockQ8_0> q8(n / 32);
  std::vector<float> y8(n);
  gpt2::QuantizeRowQ8_0(x.data(), q8.data(), n);
  gpt2::DequantizeRowQ8_0(q8.data(), y8.data(), n);
  double max8, rms8;
  Errors(x, y8, n / 32, &max8, &rms8);
  INFO("Q8_0 max error / block amax = " << max8 << ", rms error / rms = " << rms8);
  CHECK(max8 <= kMaxQ8_0RelError);
  CHECK(rms8 <= kMaxQ8_0RmsRelError);

  std::vector<BlockQ4_0> q4(n / 32);
  std::vector<float> y4(n);
  gpt2::QuantizeRowQ4_0(x.data(), q4.data(), n);
  gpt2::DequantizeRowQ4_0(q4.data(), y4.data(), n);
  double max4, rms4;
  Errors(x, y4, n / 32, &max4, &rms4);
  INFO("Q4_0 max error / block amax = " << max4 << ", rms error / rms = " << rms4);
  CHECK(max4 <= kMaxQ4_0RelError);
  CHECK(rms4 <= kMaxQ4_0RmsRelError);

  // The element of largest magnitude in each block is reproduced up to the f16 scale error.
  for (int b = 0; b < n / 32; ++b) {
    int arg = 0;
    for (int j = 1; j < 32; ++j) {
      if (std::fabs(x[b * 32 + j]) > std::fabs(x[b * 32 + arg])) arg = j;
    }
    const double v = x[b * 32 + arg];
    CHECK(std::fabs(y8[b * 32 + arg] - v) <= std::fabs(v) / 2048 * 1.001);
    CHECK(std::fabs(y4[b * 32 + arg] - v) <= std::fabs(v) / 2048 * 1.001);
  }
}
