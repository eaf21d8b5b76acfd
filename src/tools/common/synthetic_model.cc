// Deterministic GPT-2-architecture GGUF files (see synthetic_model.h for the weight formula).
//
// The file mirrors what llama.cpp's convert_hf_to_gguf.py (class GPT2Model and
// _set_vocab_gpt2) writes for a Hugging Face GPT2LMHeadModel: the same keys, the same tensor
// names in the same order (token_embd, position_embd, blocks, output_norm), no `output.weight`
// (GPT-2 ties the head to token_embd), and matrices in ggml order ne = {in, out}.
#include "tools/common/synthetic_model.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "convert/gpt2_gguf.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {
namespace {

uint64_t Fnv1a64(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

// The finaliser of SplitMix64 (Steele, Lea, Flood 2014), as in java.util.SplittableRandom.
uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// (scale, offset) of the formula, by tensor name. n_embd and n_ff come from the name's shape,
// which the caller knows; they only matter for the matrices.
void ScaleOffset(const std::string& name, int n_embd, int n_ff, double* scale, double* offset) {
  *offset = 0.0;
  if (name == "token_embd.weight") {
    *scale = 0.5;
  } else if (name == "position_embd.weight") {
    *scale = 0.3;
  } else if (EndsWith(name, "norm.weight")) {
    *scale = 0.2;
    *offset = 1.0;
  } else if (EndsWith(name, "attn_qkv.weight") || EndsWith(name, "attn_output.weight") ||
             EndsWith(name, "ffn_up.weight")) {
    *scale = 1.5 / std::sqrt(static_cast<double>(n_embd));
  } else if (EndsWith(name, "ffn_down.weight")) {
    *scale = 1.5 / std::sqrt(static_cast<double>(n_ff));
  } else {
    *scale = 0.1;  // norm biases and every other bias
  }
}

std::vector<float> FormulaTensor(const std::string& name, int64_t n, uint64_t seed, double scale,
                                 double offset) {
  std::vector<float> out(static_cast<size_t>(n));
  const uint64_t key = Fnv1a64(name) ^ seed;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t z = SplitMix64Mix(key + (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull);
    const float u = static_cast<float>(z >> 40) * (1.0f / 8388608.0f) - 1.0f;  // exact
    // Two separate roundings in double (no fused multiply-add), as numpy computes it.
    const double product = scale * static_cast<double>(u);
    const double sum = product + offset;
    out[static_cast<size_t>(i)] = static_cast<float>(sum);
  }
  return out;
}

void CheckConfig(const Config& c, TensorType matrix_type) {
  if (c.n_vocab <= 0 || c.n_ctx <= 0 || c.n_embd <= 0 || c.n_head <= 0 || c.n_layer <= 0 ||
      c.n_ff <= 0) {
    throw Error(
        "synthetic model: every size (n_vocab, n_ctx, n_embd, n_head, n_layer, n_ff) "
        "must be positive");
  }
  if (c.n_embd % c.n_head != 0) {
    throw Error("synthetic model: n_embd (" + std::to_string(c.n_embd) +
                ") must be divisible by n_head (" + std::to_string(c.n_head) + ")");
  }
  const int64_t block = TypeBlockSize(matrix_type);
  if (c.n_embd % block != 0 || c.n_ff % block != 0) {
    throw Error(
        "synthetic model: " + std::string(GgmlTypeName(static_cast<uint32_t>(matrix_type))) +
        " matrices need n_embd and n_ff to be multiples of " + std::to_string(block) +
        " (got n_embd " + std::to_string(c.n_embd) + ", n_ff " + std::to_string(c.n_ff) + ")");
  }
  if (!(c.ln_eps > 0.0f)) throw Error("synthetic model: ln_eps must be positive");
}

GgufWriter BuildWriter(const Config& c, TensorType matrix_type, const Tokenizer* tokenizer,
                       uint64_t seed) {
  CheckConfig(c, matrix_type);
  if (tokenizer != nullptr && tokenizer->vocab_size() != c.n_vocab) {
    throw Error("synthetic model: the tokenizer has " + std::to_string(tokenizer->vocab_size()) +
                " tokens but the config asks for n_vocab " + std::to_string(c.n_vocab));
  }

  GgufWriter w;
  AddGpt2Metadata(w, c, tokenizer, LlamaFileType(matrix_type), "synthetic-gpt2");

  const int64_t C = c.n_embd, F = c.n_ff;
  // A matrix: rows = output features, cols = input features (ggml ne = {cols, rows}).
  auto add_matrix = [&](const std::string& name, TensorType type, int64_t rows, int64_t cols) {
    double scale, offset;
    ScaleOffset(name, c.n_embd, c.n_ff, &scale, &offset);
    const std::vector<float> values = FormulaTensor(name, rows * cols, seed, scale, offset);
    const std::vector<uint8_t> bytes = EncodeRows(values.data(), rows, cols, type);
    w.AddTensor(name, type, {cols, rows}, bytes.data(), bytes.size());
  };
  auto add_vector = [&](const std::string& name, int64_t n) {
    double scale, offset;
    ScaleOffset(name, c.n_embd, c.n_ff, &scale, &offset);
    const std::vector<float> values = FormulaTensor(name, n, seed, scale, offset);
    w.AddTensor(name, TensorType::kF32, {n}, values.data(), values.size() * sizeof(float));
  };

  add_matrix("token_embd.weight", matrix_type, c.n_vocab, C);
  add_matrix("position_embd.weight", TensorType::kF32, c.n_ctx, C);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add_vector(p + "attn_norm.weight", C);
    add_vector(p + "attn_norm.bias", C);
    add_matrix(p + "attn_qkv.weight", matrix_type, 3 * C, C);
    add_vector(p + "attn_qkv.bias", 3 * C);
    add_matrix(p + "attn_output.weight", matrix_type, C, C);
    add_vector(p + "attn_output.bias", C);
    add_vector(p + "ffn_norm.weight", C);
    add_vector(p + "ffn_norm.bias", C);
    add_matrix(p + "ffn_up.weight", matrix_type, F, C);
    add_vector(p + "ffn_up.bias", F);
    add_matrix(p + "ffn_down.weight", matrix_type, C, F);
    add_vector(p + "ffn_down.bias", C);
  }
  add_vector("output_norm.weight", C);
  add_vector("output_norm.bias", C);
  return w;
}

}  // namespace

std::vector<float> SyntheticTensor(const std::string& name, int64_t n_elements,
                                   const Config& config, uint64_t seed) {
  if (n_elements < 0) throw Error("SyntheticTensor: negative element count for '" + name + "'");
  double scale, offset;
  ScaleOffset(name, config.n_embd, config.n_ff, &scale, &offset);
  return FormulaTensor(name, n_elements, seed, scale, offset);
}

std::vector<float> SyntheticTensor(const std::string& name, int64_t n_elements, uint64_t seed) {
  if (n_elements < 0) throw Error("SyntheticTensor: negative element count for '" + name + "'");
  // The matrices' scale needs C (and F); recover them from the element count: attn_qkv is
  // 3C x C, attn_output C x C, and the MLP matrices 4C x C (GPT-2's n_ff = 4 n_embd, as
  // convert_hf_to_gguf.py assumes). Other shapes need the Config overload.
  Config c;
  int64_t c_squared = 0;
  if (EndsWith(name, "attn_qkv.weight")) {
    c_squared = n_elements / 3;
  } else if (EndsWith(name, "attn_output.weight")) {
    c_squared = n_elements;
  } else if (EndsWith(name, "ffn_up.weight") || EndsWith(name, "ffn_down.weight")) {
    c_squared = n_elements / 4;
  }
  if (c_squared > 0) {
    const int64_t root =
        static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(c_squared))));
    if (root * root != c_squared) {
      throw Error("SyntheticTensor: cannot infer n_embd for '" + name + "' from " +
                  std::to_string(n_elements) + " elements; use the Config overload");
    }
    c.n_embd = static_cast<int>(root);
    c.n_ff = 4 * c.n_embd;
  }
  return SyntheticTensor(name, n_elements, c, seed);
}

void WriteSyntheticModel(const std::string& path, const Config& config, TensorType matrix_type,
                         const Tokenizer* tokenizer, uint64_t seed) {
  BuildWriter(config, matrix_type, tokenizer, seed).WriteFile(path);
}

std::vector<uint8_t> SyntheticModelBytes(const Config& config, TensorType matrix_type,
                                         const Tokenizer* tokenizer, uint64_t seed) {
  return BuildWriter(config, matrix_type, tokenizer, seed).Serialize();
}

Config Gpt2SmallConfig() { return FindReleasedGpt2("gpt2")->config(); }

Config TinyTestConfig() {
  Config c;
  c.n_vocab = 50257;
  c.n_ctx = 64;
  c.n_embd = 64;
  c.n_head = 4;
  c.n_layer = 2;
  c.n_ff = 256;
  c.ln_eps = 1e-5f;
  return c;
}

}  // namespace gpt2
