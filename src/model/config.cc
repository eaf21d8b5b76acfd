#include "model/config.h"

#include <string>

#include "base/error.h"
#include "format/gguf.h"

namespace gpt2 {

namespace {

int PositiveInt(const GgufFile& file, const std::string& key, uint32_t limit) {
  const uint32_t v = file.GetU32(key);
  if (v == 0 || v > limit) {
    throw Error("model metadata '" + key + "' = " + std::to_string(v) + " is out of range (1.." +
                std::to_string(limit) + ")");
  }
  return static_cast<int>(v);
}

}  // namespace

Config Config::FromGguf(const GgufFile& file) {
  const GgufValue* arch = file.Find("general.architecture");
  if (arch == nullptr) throw Error("not a model file: 'general.architecture' is missing");
  if (arch->type != GgufValueType::kString || arch->str != "gpt2") {
    throw Error("model architecture is '" + arch->str + "', but this engine runs only 'gpt2'");
  }
  // Limits far above GPT-2 XL keep later size arithmetic well inside 64 bits.
  Config c;
  c.n_ctx = PositiveInt(file, "gpt2.context_length", 1 << 16);
  c.n_embd = PositiveInt(file, "gpt2.embedding_length", 1 << 14);
  c.n_ff = PositiveInt(file, "gpt2.feed_forward_length", 1 << 16);
  c.n_layer = PositiveInt(file, "gpt2.block_count", 256);
  c.n_head = PositiveInt(file, "gpt2.attention.head_count", 1024);
  c.ln_eps = file.Find("gpt2.attention.layer_norm_epsilon")
                 ? file.GetF32("gpt2.attention.layer_norm_epsilon")
                 : 1e-5f;
  if (!(c.ln_eps > 0.0f && c.ln_eps < 1.0f)) {
    throw Error("model metadata 'gpt2.attention.layer_norm_epsilon' is out of range");
  }
  if (c.n_embd % c.n_head != 0) {
    throw Error("embedding length " + std::to_string(c.n_embd) +
                " is not divisible by the head count " + std::to_string(c.n_head));
  }
  const GgufTensor* embd = file.FindTensor("token_embd.weight");
  if (embd == nullptr) throw Error("model has no tensor 'token_embd.weight'");
  if (embd->n_dims != 2 || embd->ne[0] != c.n_embd || embd->ne[1] > (1 << 22)) {
    throw Error("tensor 'token_embd.weight' should have shape [" + std::to_string(c.n_embd) +
                ", n_vocab]");
  }
  c.n_vocab = static_cast<int>(embd->ne[1]);
  return c;
}

}  // namespace gpt2
