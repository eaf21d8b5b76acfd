// Test-side helpers for the converter tests: a tiny safetensors writer, a Hugging Face-layout
// GPT-2 checkpoint built from a formula, and an independent reference of ggml's f16 rounding and
// Q8_0/Q4_0 quantization (written from ggml-impl.h / ggml-quants.c, not from src/format).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace convert_test {

// ---- safetensors writer (huggingface/safetensors format: u64 header length, JSON, data) ----
struct StEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

inline std::string ShapeJson(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// A safetensors file's start: the header's length as 8 little-endian bytes, then the header,
// with room reserved for data_bytes more. Reserving up front also keeps GCC 12's
// -Warray-bounds from misreading the insert into a vector that started at 8 bytes (a false
// positive of its memcpy inlining).
inline std::vector<uint8_t> HeaderBytes(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out;
  out.reserve(8 + header.size() + data_bytes);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  return out;
}

// Serializes entries in order; the header is padded with spaces to a multiple of 8 bytes as the
// Python writer does.
inline std::vector<uint8_t> WriteSafetensors(const std::vector<StEntry>& entries,
                                             const std::string& metadata_json = "") {
  std::string header = "{";
  if (!metadata_json.empty()) header += "\"__metadata__\":" + metadata_json;
  size_t offset = 0;
  for (const StEntry& e : entries) {
    if (header.size() > 1) header += ",";
    header += "\"" + e.name + "\":{\"dtype\":\"" + e.dtype + "\",\"shape\":" + ShapeJson(e.shape) +
              ",\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + e.bytes.size()) + "]}";
    offset += e.bytes.size();
  }
  header += "}";
  while ((8 + header.size()) % 8 != 0) header += ' ';
  std::vector<uint8_t> out = HeaderBytes(header, offset);
  for (const StEntry& e : entries) out.insert(out.end(), e.bytes.begin(), e.bytes.end());
  return out;
}

// ---- reference f16 / bf16 (ggml-impl.h ggml_compute_fp32_to_fp16: the FP16 library's
// bit-twiddling conversion, round to nearest even) ----
inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t RefF32ToF16(float f) {
  const float scale_to_inf = FromBits(UINT32_C(0x77800000));   // 0x1.0p+112f
  const float scale_to_zero = FromBits(UINT32_C(0x08800000));  // 0x1.0p-110f
  float base = (std::fabs(f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = Bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & UINT32_C(0x80000000);
  uint32_t bias = shl1_w & UINT32_C(0xFF000000);
  if (bias < UINT32_C(0x71000000)) bias = UINT32_C(0x71000000);
  base = FromBits((bias >> 1) + UINT32_C(0x07800000)) + base;
  const uint32_t bits = Bits(base);
  const uint32_t exp_bits = (bits >> 13) & UINT32_C(0x00007C00);
  const uint32_t mantissa_bits = bits & UINT32_C(0x00000FFF);
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) |
                               (shl1_w > UINT32_C(0xFF000000) ? UINT16_C(0x7E00) : nonsign));
}

// ggml_compute_fp16_to_fp32 (FP16 library's fp16_ieee_to_fp32_value).
inline float RefF16ToF32(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & UINT32_C(0x80000000);
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = UINT32_C(0xE0) << 23;
  const float exp_scale = FromBits(UINT32_C(0x7800000));  // 0x1.0p-112f
  const float normalized_value = FromBits((two_w >> 4) + exp_offset) * exp_scale;
  const uint32_t magic_mask = UINT32_C(126) << 23;
  const float magic_bias = 0.5f;
  const float denormalized_value = FromBits((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = UINT32_C(1) << 27;
  const uint32_t result =
      sign | (two_w < denormalized_cutoff ? Bits(denormalized_value) : Bits(normalized_value));
  return FromBits(result);
}

// Round to nearest even, as torch's .to(torch.bfloat16) (NaN-free inputs).
inline uint16_t RefF32ToBf16(float f) {
  uint32_t u = Bits(f);
  u += UINT32_C(0x7FFF) + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

inline void PutU16(std::vector<uint8_t>* out, uint16_t v) {
  out->push_back(static_cast<uint8_t>(v));
  out->push_back(static_cast<uint8_t>(v >> 8));
}

// ---- reference Q8_0 / Q4_0 (ggml-quants.c quantize_row_q8_0_ref / quantize_row_q4_0_ref),
// producing the serialized block bytes: f16 d (little-endian) then the quants ----
inline std::vector<uint8_t> RefQuantizeQ8_0(const float* x, int64_t n) {
  std::vector<uint8_t> out;
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* v = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    PutU16(&out, RefF32ToF16(d));
    for (int j = 0; j < 32; ++j) {
      const float x0 = v[j] * id;
      out.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x0))));
    }
  }
  return out;
}

inline std::vector<uint8_t> RefQuantizeQ4_0(const float* x, int64_t n) {
  std::vector<uint8_t> out;
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* v = x + b * 32;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (amax < std::fabs(v[j])) {
        amax = std::fabs(v[j]);
        max = v[j];
      }
    }
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    PutU16(&out, RefF32ToF16(d));
    for (int j = 0; j < 16; ++j) {
      const float x0 = v[j] * id;
      const float x1 = v[16 + j] * id;
      const uint8_t xi0 =
          static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f))));
      const uint8_t xi1 =
          static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f))));
      out.push_back(static_cast<uint8_t>(xi0 | (xi1 << 4)));
    }
  }
  return out;
}

// ---- a tiny GPT-2 checkpoint in Hugging Face layout ----
struct TinyShape {
  int n_vocab = 96, n_ctx = 16, n_embd = 64, n_head = 4, n_layer = 2, n_ff = 256;
};

// Deterministic values in [-scale, scale) with a few blocks made awkward on purpose: an
// all-zero block, a block whose largest magnitude is negative, and values on rounding ties.
inline std::vector<float> Values(uint64_t seed, size_t n, float scale) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    v[i] = scale * (static_cast<float>(s >> 40) / static_cast<float>(1 << 23) - 1.0f);
  }
  if (n >= 96) {
    for (int j = 0; j < 32; ++j) v[j] = 0.0f;                           // d = 0 path
    v[32 + 5] = -2.0f * scale;                                          // Q4_0: max is negative
    for (int j = 64; j < 96; ++j) v[j] = (j - 80) * 0.5f * scale / 16;  // halves: ties
  }
  return v;
}

struct HfTensor {
  std::string name;            // Hugging Face name, without "transformer."
  std::vector<int64_t> shape;  // PyTorch shape
  std::vector<float> values;   // row-major
};

inline std::vector<HfTensor> TinyCheckpoint(const TinyShape& t, uint64_t seed = 7) {
  const int64_t C = t.n_embd, F = t.n_ff;
  std::vector<HfTensor> out;
  uint64_t k = seed;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale,
                 float offset = 0) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<float> v = Values(++k, n, scale);
    for (float& x : v) x += offset;
    out.push_back({name, shape, v});
  };
  add("wte.weight", {t.n_vocab, C}, 0.5f);
  add("wpe.weight", {t.n_ctx, C}, 0.3f);
  for (int l = 0; l < t.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    add(h + "ln_1.weight", {C}, 0.2f, 1.0f);
    add(h + "ln_1.bias", {C}, 0.1f);
    add(h + "attn.c_attn.weight", {C, 3 * C}, 0.2f);
    add(h + "attn.c_attn.bias", {3 * C}, 0.1f);
    add(h + "attn.c_proj.weight", {C, C}, 0.2f);
    add(h + "attn.c_proj.bias", {C}, 0.1f);
    add(h + "ln_2.weight", {C}, 0.2f, 1.0f);
    add(h + "ln_2.bias", {C}, 0.1f);
    add(h + "mlp.c_fc.weight", {C, F}, 0.2f);
    add(h + "mlp.c_fc.bias", {F}, 0.1f);
    add(h + "mlp.c_proj.weight", {F, C}, 0.1f);
    add(h + "mlp.c_proj.bias", {C}, 0.1f);
  }
  add("ln_f.weight", {C}, 0.2f, 1.0f);
  add("ln_f.bias", {C}, 0.1f);
  return out;
}

// Encodes values as a safetensors dtype; for F16/BF16 the float values are replaced by what the
// stored halves decode to, so the caller can keep comparing against `values`.
inline StEntry Encode(HfTensor* t, const std::string& dtype, const std::string& prefix) {
  StEntry e{prefix + t->name, dtype, t->shape, {}};
  for (float& x : t->values) {
    if (dtype == "F32") {
      uint32_t u = Bits(x);
      for (int i = 0; i < 4; ++i) e.bytes.push_back(static_cast<uint8_t>(u >> (8 * i)));
    } else if (dtype == "F16") {
      uint16_t h = RefF32ToF16(x);
      x = RefF16ToF32(h);
      PutU16(&e.bytes, h);
    } else {  // BF16
      uint16_t h = RefF32ToBf16(x);
      x = FromBits(static_cast<uint32_t>(h) << 16);
      PutU16(&e.bytes, h);
    }
  }
  return e;
}

inline std::string TinyConfigJson(const TinyShape& t) {
  return "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"],"
         " \"bos_token_id\": 50256, \"eos_token_id\": 50256, \"layer_norm_epsilon\": 1e-05,"
         " \"model_type\": \"gpt2\", \"n_ctx\": " +
         std::to_string(t.n_ctx) + ", \"n_embd\": " + std::to_string(t.n_embd) +
         ", \"n_head\": " + std::to_string(t.n_head) + ", \"n_inner\": " +
         (t.n_ff == 4 * t.n_embd ? std::string("null") : std::to_string(t.n_ff)) +
         ", \"n_layer\": " + std::to_string(t.n_layer) +
         ", \"n_positions\": " + std::to_string(t.n_ctx) +
         ", \"task_specific_params\": {\"text-generation\": {\"do_sample\": true, \"max_length\": "
         "50}},"
         " \"vocab_size\": " +
         std::to_string(t.n_vocab) + "}";
}

inline void WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}
inline void WriteFileText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

}  // namespace convert_test
