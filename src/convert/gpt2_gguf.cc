#include "convert/gpt2_gguf.h"

#include <cstring>

#include "base/error.h"
#include "format/f16.h"
#include "format/gguf.h"
#include "format/quant.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

namespace {

bool EndsWith(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// llama.cpp llama-vocab.h llama_token_type / gguf-py TokenType.
constexpr int32_t kTokenTypeNormal = 1;
constexpr int32_t kTokenTypeControl = 3;

}  // namespace

uint32_t LlamaFileType(TensorType matrix_type) {
  switch (matrix_type) {
    case TensorType::kF32:
      return kLlamaFtypeAllF32;
    case TensorType::kF16:
      return kLlamaFtypeMostlyF16;
    case TensorType::kQ4_0:
      return kLlamaFtypeMostlyQ4_0;
    case TensorType::kQ8_0:
      return kLlamaFtypeMostlyQ8_0;
  }
  throw Error("unsupported matrix type " + std::to_string(static_cast<uint32_t>(matrix_type)));
}

void AddGpt2Metadata(GgufWriter& writer, const Config& config, const Tokenizer* tokenizer,
                     uint32_t file_type, const std::string& model_name) {
  writer.AddString("general.architecture", "gpt2");
  if (!model_name.empty()) writer.AddString("general.name", model_name);
  writer.AddU32("gpt2.context_length", static_cast<uint32_t>(config.n_ctx));
  writer.AddU32("gpt2.embedding_length", static_cast<uint32_t>(config.n_embd));
  writer.AddU32("gpt2.feed_forward_length", static_cast<uint32_t>(config.n_ff));
  writer.AddU32("gpt2.block_count", static_cast<uint32_t>(config.n_layer));
  writer.AddU32("gpt2.attention.head_count", static_cast<uint32_t>(config.n_head));
  writer.AddF32("gpt2.attention.layer_norm_epsilon", config.ln_eps);
  writer.AddU32("general.file_type", file_type);
  writer.AddU32("general.quantization_version", 2);
  if (tokenizer == nullptr) return;

  const std::vector<std::string>& tokens = tokenizer->tokens();
  if (static_cast<int>(tokens.size()) != config.n_vocab) {
    throw Error("the vocabulary has " + std::to_string(tokens.size()) +
                " tokens but the model's embedding has " + std::to_string(config.n_vocab) +
                " rows");
  }
  std::vector<int32_t> token_types(tokens.size(), kTokenTypeNormal);
  int32_t end_of_text = -1;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == "<|endoftext|>") {
      token_types[i] = kTokenTypeControl;
      end_of_text = static_cast<int32_t>(i);
    }
  }
  writer.AddString("tokenizer.ggml.model", "gpt2");
  writer.AddString("tokenizer.ggml.pre", "gpt-2");
  writer.AddStringArray("tokenizer.ggml.tokens", tokens);
  writer.AddI32Array("tokenizer.ggml.token_type", token_types);
  writer.AddStringArray("tokenizer.ggml.merges", tokenizer->merges());
  if (end_of_text >= 0) {
    writer.AddU32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(end_of_text));
    writer.AddU32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(end_of_text));
  }
}

std::string Gpt2BlockTensorName(int layer, const char* part) {
  return "blk." + std::to_string(layer) + "." + part;
}

TensorType Gpt2TensorStorageType(const std::string& gguf_name, int n_dims, int64_t ne0,
                                 TensorType matrix_type) {
  if (n_dims <= 1 || EndsWith(gguf_name, "_norm.weight") || !EndsWith(gguf_name, ".weight") ||
      gguf_name == "position_embd.weight") {
    return TensorType::kF32;
  }
  if ((matrix_type == TensorType::kQ8_0 || matrix_type == TensorType::kQ4_0) &&
      ne0 % TypeBlockSize(matrix_type) != 0) {
    return TensorType::kF16;
  }
  return matrix_type;
}

std::vector<uint8_t> EncodeRows(const float* x, int64_t rows, int64_t cols, TensorType type) {
  if (cols % TypeBlockSize(type) != 0) {
    throw Error("rows of " + std::to_string(cols) + " elements cannot be stored as " +
                GgmlTypeName(static_cast<uint32_t>(type)));
  }
  std::vector<uint8_t> out(RowBytes(type, cols) * static_cast<size_t>(rows));
  EncodeRowsInto(x, rows, cols, type, out.data());
  return out;
}

void EncodeRowsInto(const float* x, int64_t rows, int64_t cols, TensorType type, uint8_t* out) {
  if (cols % TypeBlockSize(type) != 0) {
    throw Error("rows of " + std::to_string(cols) + " elements cannot be stored as " +
                GgmlTypeName(static_cast<uint32_t>(type)));
  }
  const size_t row_bytes = RowBytes(type, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = x + r * cols;
    uint8_t* dst = out + static_cast<size_t>(r) * row_bytes;
    switch (type) {
      case TensorType::kF32:
        std::memcpy(dst, src, row_bytes);
        break;
      case TensorType::kF16:
        for (int64_t i = 0; i < cols; ++i) {
          uint16_t h = F32ToF16(src[i]);
          std::memcpy(dst + 2 * i, &h, 2);
        }
        break;
      case TensorType::kQ8_0:
        QuantizeRowQ8_0(src, reinterpret_cast<BlockQ8_0*>(dst), cols);
        break;
      case TensorType::kQ4_0:
        QuantizeRowQ4_0(src, reinterpret_cast<BlockQ4_0*>(dst), cols);
        break;
    }
  }
}

}  // namespace gpt2
