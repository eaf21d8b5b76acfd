#include "tools/common/convert.h"

#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "base/text.h"
#include "format/gguf.h"
#include "format/json.h"
#include "format/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "tools/common/gpt2_gguf.h"

namespace gpt2 {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool FileExists(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return f.good();
}



int PositiveInt(const JsonValue& root, const char* key, bool required, int fallback) {
  const JsonValue* v = root.Find(key);
  if (v == nullptr || v->kind == JsonValue::Kind::kNull) {
    if (required) throw Error(std::string("config.json has no \"") + key + "\"");
    return fallback;
  }
  if (v->kind != JsonValue::Kind::kNumber || !v->is_integer || v->integer <= 0 ||
      v->integer > (int64_t{1} << 30)) {
    throw Error(std::string("config.json \"") + key + "\" must be a positive integer");
  }
  return static_cast<int>(v->integer);
}

// One tensor the converter expects: Hugging Face name (without "transformer."), GGUF name,
// PyTorch shape, and whether it is a Conv1D weight stored [in, out].
struct Expected {
  std::string hf_name;
  std::string gguf_name;
  std::vector<int64_t> shape;
  bool conv1d = false;
};

std::vector<Expected> ExpectedTensors(const Config& c) {
  const int64_t C = c.n_embd, F = c.n_ff, V = c.n_vocab, T = c.n_ctx;
  std::vector<Expected> e;
  e.push_back({"wte.weight", "token_embd.weight", {V, C}});
  e.push_back({"wpe.weight", "position_embd.weight", {T, C}});
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    auto blk = [&](const char* part) { return Gpt2BlockTensorName(l, part); };
    e.push_back({h + "ln_1.weight", blk("attn_norm.weight"), {C}});
    e.push_back({h + "ln_1.bias", blk("attn_norm.bias"), {C}});
    e.push_back({h + "attn.c_attn.weight", blk("attn_qkv.weight"), {C, 3 * C}, true});
    e.push_back({h + "attn.c_attn.bias", blk("attn_qkv.bias"), {3 * C}});
    e.push_back({h + "attn.c_proj.weight", blk("attn_output.weight"), {C, C}, true});
    e.push_back({h + "attn.c_proj.bias", blk("attn_output.bias"), {C}});
    e.push_back({h + "ln_2.weight", blk("ffn_norm.weight"), {C}});
    e.push_back({h + "ln_2.bias", blk("ffn_norm.bias"), {C}});
    e.push_back({h + "mlp.c_fc.weight", blk("ffn_up.weight"), {C, F}, true});
    e.push_back({h + "mlp.c_fc.bias", blk("ffn_up.bias"), {F}});
    e.push_back({h + "mlp.c_proj.weight", blk("ffn_down.weight"), {F, C}, true});
    e.push_back({h + "mlp.c_proj.bias", blk("ffn_down.bias"), {C}});
  }
  e.push_back({"ln_f.weight", "output_norm.weight", {C}});
  e.push_back({"ln_f.bias", "output_norm.bias", {C}});
  return e;
}

std::string StripPrefix(const std::string& name) {
  static const std::string kPrefix = "transformer.";
  if (name.compare(0, kPrefix.size(), kPrefix) == 0) return name.substr(kPrefix.size());
  return name;
}

// Writes `values` (row-major PyTorch shape `shape`) as GGUF tensor `gguf_name`.
void AddConverted(const std::string& gguf_name, const std::vector<float>& values,
                  const std::vector<int64_t>& shape, TensorType matrix_type, GgufWriter* writer,
                  std::ostream* log) {
  // ggml's ne is the PyTorch shape reversed: the last (contiguous) dimension is ne[0].
  std::vector<int64_t> ne(shape.rbegin(), shape.rend());
  const int64_t cols = ne[0];
  const int64_t rows = static_cast<int64_t>(values.size()) / cols;
  const TensorType type =
      Gpt2TensorStorageType(gguf_name, static_cast<int>(ne.size()), cols, matrix_type);
  std::vector<uint8_t> bytes = EncodeRows(values.data(), rows, cols, type);
  writer->AddTensor(gguf_name, type, ne, bytes.data(), bytes.size());
  if (log) {
    *log << "  " << gguf_name << "  " << GgmlTypeName(static_cast<uint32_t>(type)) << "  "
         << ShapeString(ne) << "\n";
  }
}

}  // namespace

TensorType ParseConvertType(const std::string& name) {
  if (name == "f32") return TensorType::kF32;
  if (name == "f16") return TensorType::kF16;
  if (name == "q8_0") return TensorType::kQ8_0;
  if (name == "q4_0") return TensorType::kQ4_0;
  throw Error("unknown output type '" + name + "'; expected f32, f16, q8_0 or q4_0");
}

Config ConfigFromHfJson(const std::string& json_text) {
  JsonValue root = ParseJson(json_text, "config.json");
  if (root.kind != JsonValue::Kind::kObject) throw Error("config.json is not a JSON object");
  if (const JsonValue* mt = root.Find("model_type")) {
    if (mt->kind != JsonValue::Kind::kString || mt->str != "gpt2") {
      throw Error("config.json model_type is not \"gpt2\"; only GPT-2 checkpoints are supported");
    }
  }
  if (const JsonValue* act = root.Find("activation_function")) {
    // GPT-2's MLP uses the tanh approximation of GELU; so do llama.cpp's graph and ours.
    if (act->kind != JsonValue::Kind::kString ||
        (act->str != "gelu_new" && act->str != "gelu_pytorch_tanh")) {
      throw Error("config.json activation_function \"" + act->str +
                  "\" is not supported (GPT-2 uses gelu_new)");
    }
  }
  for (const char* flag : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"}) {
    const JsonValue* v = root.Find(flag);
    if (v && v->kind == JsonValue::Kind::kBool && v->boolean) {
      throw Error(std::string("config.json sets ") + flag + ", which llama.cpp's GPT-2 does not implement");
    }
  }
  Config c;
  c.n_layer = PositiveInt(root, "n_layer", true, 0);
  c.n_head = PositiveInt(root, "n_head", true, 0);
  c.n_embd = PositiveInt(root, "n_embd", true, 0);
  c.n_vocab = PositiveInt(root, "vocab_size", true, 0);
  // n_positions is the size of wpe; older configs also carry n_ctx (the same number).
  c.n_ctx = PositiveInt(root, "n_positions", false, 0);
  if (c.n_ctx == 0) c.n_ctx = PositiveInt(root, "n_ctx", true, 0);
  c.n_ff = PositiveInt(root, "n_inner", false, 4 * c.n_embd);
  if (const JsonValue* eps = root.Find("layer_norm_epsilon")) {
    if (eps->kind != JsonValue::Kind::kNumber || !(eps->number > 0)) {
      throw Error("config.json layer_norm_epsilon must be a positive number");
    }
    c.ln_eps = static_cast<float>(eps->number);
  }
  if (c.n_embd % c.n_head != 0) {
    throw Error("config.json n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " +
                std::to_string(c.n_head));
  }
  return c;
}

ConvertStats BuildGpt2Gguf(const SafetensorsFile& checkpoint, const Config& config,
                           const Tokenizer* tokenizer, TensorType matrix_type, GgufWriter* writer,
                           std::ostream* log, const std::string& model_name) {
  ConvertStats stats;
  const std::vector<Expected> expected = ExpectedTensors(config);
  std::map<std::string, size_t> expected_index;
  for (size_t i = 0; i < expected.size(); ++i) expected_index[expected[i].hf_name] = i;

  // Index the checkpoint by name without the "transformer." prefix, and reject strays.
  std::map<std::string, const SafetensorsTensor*> by_name;
  const SafetensorsTensor* lm_head = nullptr;
  for (const SafetensorsTensor& t : checkpoint.tensors()) {
    const std::string name = StripPrefix(t.name);
    if (EndsWith(name, ".attn.bias") || EndsWith(name, ".attn.masked_bias")) {
      ++stats.tensors_skipped;  // causal-mask buffers, not weights
      continue;
    }
    if (name == "lm_head.weight") {
      lm_head = &t;
      continue;
    }
    if (expected_index.count(name) == 0) {
      throw Error("checkpoint tensor '" + t.name + "' is not part of a GPT-2 with " +
                  std::to_string(config.n_layer) + " layers (cannot map it to a GGUF name)");
    }
    if (!by_name.emplace(name, &t).second) {
      throw Error("checkpoint has tensor '" + name + "' twice (with and without 'transformer.')");
    }
  }

  AddGpt2Metadata(*writer, config, tokenizer, LlamaFileType(matrix_type), model_name);

  std::vector<float> wte_values;
  for (const Expected& e : expected) {
    auto it = by_name.find(e.hf_name);
    if (it == by_name.end()) {
      throw Error("checkpoint is missing tensor '" + e.hf_name + "' (or 'transformer." + e.hf_name + "')");
    }
    const SafetensorsTensor& t = *it->second;
    if (t.shape != e.shape) {
      throw Error("tensor '" + t.name + "' has shape " + ShapeString(t.shape) + " but config.json implies " +
                  ShapeString(e.shape));
    }
    std::vector<float> values = ReadAsF32(t);
    std::vector<int64_t> shape = e.shape;
    if (e.conv1d) {
      // Conv1D computes x @ W with W [in, out]; ggml's mul_mat wants rows of `in` elements.
      const int64_t in = e.shape[0], out = e.shape[1];
      std::vector<float> transposed(values.size());
      for (int64_t i = 0; i < in; ++i) {
        for (int64_t o = 0; o < out; ++o) transposed[o * in + i] = values[i * out + o];
      }
      values.swap(transposed);
      shape = {out, in};
    }
    AddConverted(e.gguf_name, values, shape, matrix_type, writer, log);
    ++stats.tensors_written;
    if (e.hf_name == "wte.weight" && lm_head != nullptr) wte_values = values;
  }

  if (lm_head != nullptr) {
    const std::vector<int64_t> shape = {config.n_vocab, config.n_embd};
    if (lm_head->shape != shape) {
      throw Error("tensor '" + lm_head->name + "' has shape " + ShapeString(lm_head->shape) +
                  " but config.json implies " + ShapeString(shape));
    }
    std::vector<float> values = ReadAsF32(*lm_head);
    const bool tied = values.size() == wte_values.size() &&
                      std::memcmp(values.data(), wte_values.data(), values.size() * sizeof(float)) == 0;
    if (!tied) {
      AddConverted("output.weight", values, shape, matrix_type, writer, log);
      ++stats.tensors_written;
      stats.lm_head_tied = false;
    }
  }
  return stats;
}

ConvertStats ConvertHfGpt2(const std::string& input_dir, const std::string& output_path,
                           TensorType matrix_type, std::ostream* log) {
  const std::string dir = input_dir.empty() ? "." : input_dir;
  const Config hf = ConfigFromHfJson(ReadWholeFile(dir + "/config.json", "Hugging Face config"));

  std::unique_ptr<Tokenizer> tokenizer;
  if (FileExists(dir + "/vocab.json") && FileExists(dir + "/merges.txt")) {
    tokenizer = Tokenizer::FromFiles(dir + "/vocab.json", dir + "/merges.txt");
  } else if (FileExists(dir + "/encoder.json") && FileExists(dir + "/vocab.bpe")) {
    tokenizer = Tokenizer::FromFiles(dir + "/encoder.json", dir + "/vocab.bpe");
  } else {
    throw Error(dir + " has no vocabulary: expected vocab.json + merges.txt (Hugging Face) or "
                      "encoder.json + vocab.bpe (OpenAI)");
  }

  const std::string weights_path = dir + "/model.safetensors";
  if (!FileExists(weights_path)) {
    throw Error(weights_path + " not found (sharded or PyTorch .bin checkpoints are not supported)");
  }
  std::unique_ptr<MappedFile> mapped = MappedFile::Open(weights_path);
  std::unique_ptr<SafetensorsFile> checkpoint =
      SafetensorsFile::Parse(mapped->data(), mapped->size(), weights_path);

  if (log) *log << "converting " << weights_path << " to " << output_path << "\n";
  GgufWriter writer;
  ConvertStats stats = BuildGpt2Gguf(*checkpoint, hf, tokenizer.get(), matrix_type, &writer, log);
  writer.WriteFile(output_path);
  if (log) {
    *log << "wrote " << stats.tensors_written << " tensors (" << stats.tensors_skipped
         << " mask buffers skipped, lm_head " << (stats.lm_head_tied ? "tied to token_embd" : "kept as output.weight")
         << ") to " << output_path << "\n";
  }
  return stats;
}

}  // namespace gpt2
