// The synthetic model maker (tools/common/synthetic_model.h): file layout as llama.cpp's
// convert_hf_to_gguf.py writes GPT-2, with and without the tokenizer, and its error handling.
// The weight values themselves are checked against numpy in golden_test.cc.
#include "tools/common/synthetic_model.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../test_paths.h"
#include "base/error.h"
#include "format/gguf.h"
#include "format/quant.h"
#include "format/tensor_type.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

namespace gpt2_test {
namespace {

TEST_CASE("synthetic model carries GPT-2's tokenizer as the converter writes it",
          "[model][synthetic]") {
  const std::unique_ptr<gpt2::Tokenizer> tokenizer =
      gpt2::Tokenizer::FromFiles(EncoderJsonPath(), VocabBpePath());
  const std::vector<uint8_t> bytes =
      gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), gpt2::TensorType::kQ8_0, tokenizer.get());
  const std::unique_ptr<gpt2::GgufFile> file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
  CHECK(file->GetString("tokenizer.ggml.model") == "gpt2");
  CHECK(file->GetString("tokenizer.ggml.pre") == "gpt-2");
  const std::vector<std::string> tokens = file->GetStringArray("tokenizer.ggml.tokens");
  REQUIRE(tokens.size() == 50257);
  CHECK(tokens[50256] == "<|endoftext|>");
  CHECK(tokens[262] == "\xC4\xA0the");  // "\u0120the": byte-alphabet form, as encoder.json has it
  const std::vector<std::string> merges = file->GetStringArray("tokenizer.ggml.merges");
  CHECK(merges.size() == 50000);  // vocab.bpe: 50000 merges after its version line
  CHECK(merges[0] == "\xC4\xA0 t");
  const gpt2::GgufValue* types = file->Find("tokenizer.ggml.token_type");
  REQUIRE(types != nullptr);
  REQUIRE(types->type == gpt2::GgufValueType::kArray);
  CHECK(types->array_type == gpt2::GgufValueType::kI32);
  const std::vector<gpt2::GgufValue> type_values = file->GetArray("tokenizer.ggml.token_type");
  REQUIRE(type_values.size() == 50257);
  CHECK(type_values[0].i == 1);      // NORMAL
  CHECK(type_values[50256].i == 3);  // CONTROL
  CHECK(file->GetU32("tokenizer.ggml.bos_token_id") == 50256);
  CHECK(file->GetU32("tokenizer.ggml.eos_token_id") == 50256);
  CHECK(file->GetU32("general.file_type") == 7);  // LLAMA_FTYPE_MOSTLY_Q8_0

  // A tokenizer whose size differs from n_vocab.
  gpt2::Config small = gpt2::TinyTestConfig();
  small.n_vocab = 1000;
  CHECK_THROWS_WITH(gpt2::SyntheticModelBytes(small, gpt2::TensorType::kF32, tokenizer.get()),
                    Catch::Contains("n_vocab"));

  // The tokenizer read back from the file encodes as GPT-2 does (ids from tiktoken "gpt2").
  const std::unique_ptr<gpt2::Tokenizer> reread = gpt2::Tokenizer::FromGguf(*file);
  CHECK(reread->Encode("Hello world") == std::vector<int>{15496, 995});
}

TEST_CASE("synthetic model tensors have converter names, shapes and types", "[model][synthetic]") {
  gpt2::Config config = gpt2::TinyTestConfig();
  config.n_vocab = 1000;
  const std::vector<uint8_t> bytes =
      gpt2::SyntheticModelBytes(config, gpt2::TensorType::kQ4_0, nullptr);
  const std::unique_ptr<gpt2::GgufFile> file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
  CHECK(file->tensors().size() == 2 + 12 * 2 + 2);
  CHECK(file->tensors().front().name == "token_embd.weight");
  CHECK(file->tensors().back().name == "output_norm.bias");
  const gpt2::GgufTensor* embd = file->FindTensor("token_embd.weight");
  REQUIRE(embd != nullptr);
  CHECK(embd->type == gpt2::TensorType::kQ4_0);
  CHECK(embd->ne[0] == 64);
  CHECK(embd->ne[1] == 1000);
  CHECK(embd->nbytes == 1000 * 2 * sizeof(gpt2::BlockQ4_0));
  const gpt2::GgufTensor* up = file->FindTensor("blk.1.ffn_up.weight");
  REQUIRE(up != nullptr);
  CHECK(up->ne[0] == 64);
  CHECK(up->ne[1] == 256);
  const gpt2::GgufTensor* up_b = file->FindTensor("blk.1.ffn_up.bias");
  REQUIRE(up_b != nullptr);
  CHECK(up_b->type == gpt2::TensorType::kF32);
  CHECK(up_b->n_dims == 1);
  CHECK(up_b->ne[0] == 256);
  CHECK(file->FindTensor("blk.2.attn_qkv.weight") == nullptr);

  // The Q4_0 bytes are the reference quantization of the formula's values.
  const std::vector<float> values = gpt2::SyntheticTensor("token_embd.weight", 64 * 1000, config);
  std::vector<gpt2::BlockQ4_0> blocks(2);
  gpt2::QuantizeRowQ4_0(values.data() + 64 * 7, blocks.data(), 64);
  CHECK(std::memcmp(embd->data + 7 * 2 * sizeof(gpt2::BlockQ4_0), blocks.data(),
                    2 * sizeof(gpt2::BlockQ4_0)) == 0);
}

TEST_CASE("synthetic model is deterministic in the seed", "[model][synthetic]") {
  gpt2::Config config = gpt2::TinyTestConfig();
  config.n_vocab = 256;
  const auto a = gpt2::SyntheticModelBytes(config, gpt2::TensorType::kF16, nullptr, 1);
  const auto b = gpt2::SyntheticModelBytes(config, gpt2::TensorType::kF16, nullptr, 1);
  const auto c = gpt2::SyntheticModelBytes(config, gpt2::TensorType::kF16, nullptr, 2);
  CHECK(a == b);
  CHECK(a.size() == c.size());
  CHECK(a != c);
  const std::vector<float> w = gpt2::SyntheticTensor("blk.0.attn_norm.weight", 64, config, 1);
  for (float v : w) {
    CHECK(v >= 0.8f);  // scale 0.2 around offset 1
    CHECK(v < 1.2f);
  }
}

TEST_CASE("synthetic model rejects impossible configs with a clear error", "[model][synthetic]") {
  gpt2::Config config = gpt2::TinyTestConfig();
  config.n_embd = 40;  // not a multiple of Q8_0's 32-weight blocks
  config.n_head = 4;
  CHECK_THROWS_AS(gpt2::SyntheticModelBytes(config, gpt2::TensorType::kQ8_0, nullptr), gpt2::Error);
  config = gpt2::TinyTestConfig();
  config.n_head = 3;
  CHECK_THROWS_WITH(gpt2::SyntheticModelBytes(config, gpt2::TensorType::kF32, nullptr),
                    Catch::Contains("divisible by n_head"));
  config = gpt2::TinyTestConfig();
  config.n_layer = 0;
  CHECK_THROWS_AS(gpt2::SyntheticModelBytes(config, gpt2::TensorType::kF32, nullptr), gpt2::Error);
  CHECK_THROWS_AS(gpt2::SyntheticTensor("blk.0.ffn_up.weight", 1000, gpt2::kSyntheticSeed),
                  gpt2::Error);
}

}  // namespace
}  // namespace gpt2_test
