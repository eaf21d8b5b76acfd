// Tokenizer::FromGguf, apart from tokenizer.cc so that the tokenizer links without the GGUF
// reader when a program never loads a GGUF (the static library only pulls this file in on use).
#include "base/error.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

// llama.cpp's convert_hf_to_gguf.py writes GPT-2's vocabulary as tokenizer.ggml.model = "gpt2",
// tokenizer.ggml.tokens (byte-alphabet strings in id order) and tokenizer.ggml.merges ("a b").
std::unique_ptr<Tokenizer> Tokenizer::FromGguf(const GgufFile& file) {
  if (const GgufValue* model = file.Find("tokenizer.ggml.model")) {
    if (model->type == GgufValueType::kString && model->str != "gpt2") {
      throw Error("GGUF tokenizer.ggml.model is '" + model->str +
                  "'; only GPT-2's byte-level BPE ('gpt2') is supported");
    }
  }
  if (file.Find("tokenizer.ggml.tokens") == nullptr) {
    throw Error(
        "This model file has no tokenizer: its metadata lacks 'tokenizer.ggml.tokens'. "
        "Convert the model with its vocabulary (llama.cpp's convert_hf_to_gguf.py and "
        "gpt2-convert both include it).");
  }
  std::vector<std::string> tokens = file.GetStringArray("tokenizer.ggml.tokens");
  if (tokens.empty()) throw Error("GGUF tokenizer.ggml.tokens is empty");
  std::vector<std::string> merges = file.GetStringArray("tokenizer.ggml.merges");
  return std::make_unique<Tokenizer>(std::move(tokens), std::move(merges));
}

}  // namespace gpt2
