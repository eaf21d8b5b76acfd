// The Hugging Face GPT-2 -> GGUF converter: names, layouts and storage types as llama.cpp
// writes them, quantized blocks bit-identical to an independent reference of ggml's rounding,
// and clear errors for checkpoints that do not fit the config.
#include "convert/convert.h"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../test_paths.h"
#include "base/error.h"
#include "convert/gpt2_gguf.h"
#include "convert_test_util.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "model/session.h"
#include "tokenizer/tokenizer.h"

using namespace convert_test;
using gpt2::TensorType;

namespace {

struct Converted {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gpt2::GgufFile> gguf;
  gpt2::ConvertStats stats;
};

std::vector<StEntry> EncodeAll(std::vector<HfTensor>* tensors, const std::string& dtype,
                               const std::string& prefix) {
  std::vector<StEntry> entries;
  for (HfTensor& t : *tensors) entries.push_back(Encode(&t, dtype, prefix));
  return entries;
}

gpt2::Config ConfigOf(const TinyShape& s) { return gpt2::ConfigFromHfJson(TinyConfigJson(s)); }

Converted Convert(const std::vector<uint8_t>& st, const TinyShape& shape, TensorType type,
                  const gpt2::Tokenizer* tokenizer = nullptr) {
  auto checkpoint = gpt2::SafetensorsFile::Parse(st.data(), st.size(), "tiny.safetensors");
  gpt2::GgufWriter writer;
  Converted c;
  c.stats = gpt2::BuildGpt2Gguf(*checkpoint, ConfigOf(shape), tokenizer, type, &writer, nullptr);
  c.bytes = writer.Serialize();
  c.gguf = gpt2::GgufFile::Parse(c.bytes.data(), c.bytes.size());
  // The page's tensor-at-a-time conversion writes the same file (each tensor in reverse order
  // here, into a buffer of 0xAB bytes: the order does not matter and the padding is written).
  const gpt2::Gpt2GgufConversion conversion(*checkpoint, ConfigOf(shape), tokenizer, type, "");
  std::vector<uint8_t> streamed(static_cast<size_t>(conversion.layout().size), 0xAB);
  conversion.WriteHeader(streamed.data());
  for (int i = conversion.num_tensors() - 1; i >= 0; --i)
    conversion.EncodeTensor(i, streamed.data(), nullptr);
  REQUIRE(streamed == c.bytes);
  CHECK(conversion.stats().tensors_written == c.stats.tensors_written);
  CHECK(conversion.stats().lm_head_tied == c.stats.lm_head_tied);
  // The streamed conversion (the page's Range requests) from the header alone, then each piece it
  // asks for as a copy of just those bytes; pieces far smaller than a tensor, so the embeddings
  // come in many row pieces and a lm_head tie check in several.
  for (const uint64_t piece : {uint64_t{1000}, uint64_t{1} << 20}) {
    const uint64_t header_end = gpt2::SafetensorsFile::HeaderEnd(st.data(), st.size(), st.size());
    gpt2::Gpt2GgufStream stream(st.data(), static_cast<size_t>(header_end), st.size(),
                                ConfigOf(shape), tokenizer, type, "", uint64_t{1} << 30, piece);
    uint64_t fed = 0, last_offset = 0;
    int pieces = 0;
    while (!stream.done()) {
      const gpt2::Gpt2GgufStream::Range r = stream.next();
      if (stream.output_size() >
          0) {  // past the tie check: in the file's order, one sequential read
        REQUIRE(r.offset >= last_offset);
        last_offset = r.offset + r.bytes;
      }
      REQUIRE(r.bytes > 0);
      // A Conv1D matrix (c_attn, c_fc, the projections) comes whole.
      const uint64_t conv1d = uint64_t{4} * shape.n_embd * std::max(3 * shape.n_embd, shape.n_ff);
      REQUIRE(r.bytes <= std::max(piece, conv1d));
      REQUIRE(r.offset + r.bytes <= st.size());
      const std::vector<uint8_t> bytes(
          st.begin() + static_cast<std::ptrdiff_t>(r.offset),
          st.begin() + static_cast<std::ptrdiff_t>(r.offset + r.bytes));
      stream.Feed(bytes.data(), bytes.size());
      fed += r.bytes;
      ++pieces;
    }
    CHECK(fed == stream.fed_bytes());
    CHECK(fed == stream.source_bytes());
    CHECK(stream.tensors_done() == conversion.num_tensors());
    REQUIRE(stream.output_size() == c.bytes.size());
    CHECK(std::memcmp(stream.output(), c.bytes.data(), c.bytes.size()) == 0);
    if (piece == 1000) CHECK(pieces > conversion.num_tensors());
  }
  return c;
}

// The GGUF layout of an HF tensor: Conv1D weights [in, out] are transposed to rows of `in`.
std::vector<float> GgmlRowMajor(const HfTensor& t, bool conv1d, int64_t* rows, int64_t* cols) {
  if (t.shape.size() == 1) {
    *rows = 1;
    *cols = t.shape[0];
    return t.values;
  }
  if (!conv1d) {
    *rows = t.shape[0];
    *cols = t.shape[1];
    return t.values;
  }
  const int64_t in = t.shape[0], out = t.shape[1];
  std::vector<float> v(t.values.size());
  for (int64_t i = 0; i < in; ++i)
    for (int64_t o = 0; o < out; ++o) v[o * in + i] = t.values[i * out + o];
  *rows = out;
  *cols = in;
  return v;
}

std::string GgufName(const std::string& hf) {
  static const std::pair<const char*, const char*> kMap[] = {
      {"ln_1.weight", "attn_norm.weight"},          {"ln_1.bias", "attn_norm.bias"},
      {"attn.c_attn.weight", "attn_qkv.weight"},    {"attn.c_attn.bias", "attn_qkv.bias"},
      {"attn.c_proj.weight", "attn_output.weight"}, {"attn.c_proj.bias", "attn_output.bias"},
      {"ln_2.weight", "ffn_norm.weight"},           {"ln_2.bias", "ffn_norm.bias"},
      {"mlp.c_fc.weight", "ffn_up.weight"},         {"mlp.c_fc.bias", "ffn_up.bias"},
      {"mlp.c_proj.weight", "ffn_down.weight"},     {"mlp.c_proj.bias", "ffn_down.bias"}};
  if (hf == "wte.weight") return "token_embd.weight";
  if (hf == "wpe.weight") return "position_embd.weight";
  if (hf == "ln_f.weight") return "output_norm.weight";
  if (hf == "ln_f.bias") return "output_norm.bias";
  const size_t dot = hf.find('.', 2);
  const std::string block = hf.substr(2, dot - 2);
  const std::string rest = hf.substr(dot + 1);
  for (const auto& m : kMap) {
    if (rest == m.first) return "blk." + block + "." + m.second;
  }
  return "?";
}

bool IsConv1D(const std::string& hf) {
  return hf.find("c_attn.weight") != std::string::npos ||
         hf.find("c_proj.weight") != std::string::npos ||
         hf.find("c_fc.weight") != std::string::npos;
}

// Independent expectation for one tensor's bytes at `type`.
std::vector<uint8_t> ExpectedBytes(const std::vector<float>& v, int64_t rows, int64_t cols,
                                   TensorType type) {
  std::vector<uint8_t> out;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = v.data() + r * cols;
    std::vector<uint8_t> b;
    if (type == TensorType::kF32) {
      b.resize(cols * 4);
      std::memcpy(b.data(), row, cols * 4);
    } else if (type == TensorType::kF16) {
      for (int64_t i = 0; i < cols; ++i) PutU16(&b, RefF32ToF16(row[i]));
    } else if (type == TensorType::kQ8_0) {
      b = RefQuantizeQ8_0(row, cols);
    } else {
      b = RefQuantizeQ4_0(row, cols);
    }
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

void CheckAgainstReference(const std::vector<HfTensor>& hf, const gpt2::GgufFile& gguf,
                           TensorType type) {
  for (const HfTensor& t : hf) {
    const std::string name = GgufName(t.name);
    INFO("tensor " << t.name << " -> " << name);
    const gpt2::GgufTensor* g = gguf.FindTensor(name);
    REQUIRE(g != nullptr);
    int64_t rows = 0, cols = 0;
    std::vector<float> v = GgmlRowMajor(t, IsConv1D(t.name), &rows, &cols);
    REQUIRE(g->ne[0] == cols);
    REQUIRE(g->ne[1] == rows);
    REQUIRE(g->n_dims == static_cast<int>(t.shape.size()));
    // llama.cpp's rules: 1-D, norms, biases and position_embd stay F32, other matrices `type`.
    const bool matrix = t.shape.size() == 2 && t.name != "wpe.weight";
    const TensorType want = matrix ? type : TensorType::kF32;
    REQUIRE(g->type == want);
    std::vector<uint8_t> expected = ExpectedBytes(v, rows, cols, want);
    REQUIRE(g->nbytes == expected.size());
    CHECK(std::memcmp(g->data, expected.data(), expected.size()) == 0);
  }
}

}  // namespace

TEST_CASE("convert: every type matches ggml's reference rounding, F32 input", "[convert]") {
  const TinyShape shape;
  for (TensorType type :
       {TensorType::kF32, TensorType::kF16, TensorType::kQ8_0, TensorType::kQ4_0}) {
    INFO("type " << gpt2::GgmlTypeName(static_cast<uint32_t>(type)));
    std::vector<HfTensor> hf = TinyCheckpoint(shape);
    const auto st = WriteSafetensors(EncodeAll(&hf, "F32", "transformer."), "{\"format\":\"pt\"}");
    Converted c = Convert(st, shape, type);
    CHECK(c.stats.tensors_written == 4 + 12 * shape.n_layer);
    CHECK(c.stats.lm_head_tied);
    CHECK(c.gguf->tensors().size() == static_cast<size_t>(4 + 12 * shape.n_layer));
    CHECK(c.gguf->FindTensor("output.weight") == nullptr);
    CheckAgainstReference(hf, *c.gguf, type);
    CHECK(c.gguf->GetU32("general.file_type") == gpt2::LlamaFileType(type));
  }
}

TEST_CASE("convert: F16 and BF16 checkpoints, with and without the transformer. prefix",
          "[convert]") {
  const TinyShape shape;
  for (const char* dtype : {"F16", "BF16"}) {
    for (const char* prefix : {"", "transformer."}) {
      for (TensorType type :
           {TensorType::kF32, TensorType::kF16, TensorType::kQ8_0, TensorType::kQ4_0}) {
        INFO(dtype << " prefix '" << prefix << "' type "
                   << gpt2::GgmlTypeName(static_cast<uint32_t>(type)));
        std::vector<HfTensor> hf = TinyCheckpoint(shape, 11);
        const auto st =
            WriteSafetensors(EncodeAll(&hf, dtype, prefix));  // hf now holds decoded values
        Converted c = Convert(st, shape, type);
        CheckAgainstReference(hf, *c.gguf, type);
      }
    }
  }
}

TEST_CASE("convert: metadata keys as llama.cpp writes them for GPT-2", "[convert]") {
  TinyShape shape;
  shape.n_ff = 128;  // n_inner set explicitly
  std::vector<HfTensor> hf = TinyCheckpoint(shape);
  Converted c = Convert(WriteSafetensors(EncodeAll(&hf, "F32", "")), shape, TensorType::kQ8_0);
  const gpt2::GgufFile& g = *c.gguf;
  CHECK(g.GetString("general.architecture") == "gpt2");
  CHECK(g.GetU32("gpt2.context_length") == 16);
  CHECK(g.GetU32("gpt2.embedding_length") == 64);
  CHECK(g.GetU32("gpt2.feed_forward_length") == 128);
  CHECK(g.GetU32("gpt2.block_count") == 2);
  CHECK(g.GetU32("gpt2.attention.head_count") == 4);
  CHECK(g.GetF32("gpt2.attention.layer_norm_epsilon") == 1e-5f);
  CHECK(g.GetU32("general.file_type") == 7);  // LLAMA_FTYPE_MOSTLY_Q8_0
  CHECK(g.GetU32("general.quantization_version") == 2);
  CHECK(g.Find("tokenizer.ggml.model") == nullptr);  // no tokenizer given
  gpt2::Config config = gpt2::Config::FromGguf(g);
  CHECK(config.n_vocab == shape.n_vocab);
  CHECK(config.n_ff == 128);
  CHECK(config.n_layer == 2);
}

TEST_CASE("convert: vocabulary keys and the whole directory pipeline", "[convert]") {
  TinyShape shape;
  shape.n_vocab = 50257;
  std::vector<HfTensor> hf = TinyCheckpoint(shape, 3);
  const std::string dir = "/tmp/gpt2_convert_test_" + std::to_string(::getpid());
  REQUIRE(std::system(("mkdir -p " + dir).c_str()) == 0);
  WriteFileBytes(dir + "/model.safetensors", WriteSafetensors(EncodeAll(&hf, "F32", "")));
  WriteFileText(dir + "/config.json", TinyConfigJson(shape));
  // OpenAI's file names; Hugging Face's vocab.json/merges.txt have the same formats.
  REQUIRE(std::system(("cp " + gpt2_test::EncoderJsonPath() + " " + dir + "/encoder.json && cp " +
                       gpt2_test::VocabBpePath() + " " + dir + "/vocab.bpe")
                          .c_str()) == 0);
  const std::string out = dir + "/out.gguf";
  std::ostringstream log;
  gpt2::ConvertStats stats = gpt2::ConvertHfGpt2(dir, out, TensorType::kQ4_0, &log);
  CHECK(stats.tensors_written == 28);
  CHECK(log.str().find("token_embd.weight  q4_0  [64, 50257]") != std::string::npos);
  auto mapped = gpt2::MappedFile::Open(out);
  auto g = gpt2::GgufFile::Parse(mapped->data(), mapped->size());
  CHECK(g->GetString("tokenizer.ggml.model") == "gpt2");
  CHECK(g->GetString("tokenizer.ggml.pre") == "gpt-2");
  const std::vector<std::string> tokens = g->GetStringArray("tokenizer.ggml.tokens");
  REQUIRE(tokens.size() == 50257);
  CHECK(tokens[0] == "!");
  CHECK(tokens[262] == "\xC4\xA0the");  // "\u0120the"
  CHECK(tokens[50256] == "<|endoftext|>");
  const std::vector<std::string> merges = g->GetStringArray("tokenizer.ggml.merges");
  REQUIRE(merges.size() == 50000);
  CHECK(merges[0] == "\xC4\xA0 t");  // first line of vocab.bpe after the version comment
  const gpt2::GgufValue* types = g->Find("tokenizer.ggml.token_type");
  REQUIRE(types != nullptr);
  const std::vector<gpt2::GgufValue> type_values = g->GetArray("tokenizer.ggml.token_type");
  REQUIRE(type_values.size() == 50257);
  CHECK(type_values[0].i == 1);
  CHECK(type_values[50256].i == 3);
  CHECK(g->GetU32("tokenizer.ggml.bos_token_id") == 50256);
  CHECK(g->GetU32("tokenizer.ggml.eos_token_id") == 50256);
  CHECK(g->Find("general.name") == nullptr);  // not one of OpenAI's shapes, no --name
  CheckAgainstReference(hf, *g, TensorType::kQ4_0);
  // Atomic write: no temporary left behind.
  CHECK_FALSE(std::ifstream(out + ".tmp").good());

  // A name given is written as general.name.
  gpt2::ConvertHfGpt2(dir, out, TensorType::kQ8_0, nullptr, "my GPT-2");
  auto named_file = gpt2::MappedFile::Open(out);
  CHECK(gpt2::GgufFile::Parse(named_file->data(), named_file->size())->GetString("general.name") ==
        "my GPT-2");

  // Without a vocabulary the converter says what it needs.
  std::remove((dir + "/vocab.bpe").c_str());
  REQUIRE_THROWS_WITH(gpt2::ConvertHfGpt2(dir, dir + "/x.gguf", TensorType::kQ8_0, nullptr),
                      Catch::Contains("has no vocabulary: expected vocab.json + merges.txt"));
  CHECK_FALSE(std::ifstream(dir + "/x.gguf").good());
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("convert: mask buffers skipped, lm_head tied or kept", "[convert]") {
  const TinyShape shape;
  std::vector<HfTensor> hf = TinyCheckpoint(shape);
  std::vector<StEntry> entries = EncodeAll(&hf, "F32", "transformer.");
  // The causal-mask buffers older checkpoints carry (GPT2Attention's registered buffers).
  entries.push_back(
      {"transformer.h.0.attn.bias", "F32", {1, 1, 16, 16}, std::vector<uint8_t>(1024)});
  entries.push_back({"transformer.h.1.attn.masked_bias", "F32", {}, std::vector<uint8_t>(4)});
  HfTensor head = hf[0];  // equal to wte: tied
  entries.push_back(Encode(&head, "F32", "lm_head."));
  entries.back().name = "lm_head.weight";
  Converted tied = Convert(WriteSafetensors(entries), shape, TensorType::kQ8_0);
  CHECK(tied.stats.tensors_skipped == 2);
  CHECK(tied.stats.lm_head_tied);
  CHECK(tied.gguf->FindTensor("output.weight") == nullptr);

  // A different head is written as output.weight (nn.Linear is already [out, in]).
  head.values[100] += 1.0f;
  entries.back() = Encode(&head, "F32", "");
  entries.back().name = "lm_head.weight";
  Converted kept = Convert(WriteSafetensors(entries), shape, TensorType::kQ8_0);
  CHECK_FALSE(kept.stats.lm_head_tied);
  const gpt2::GgufTensor* out = kept.gguf->FindTensor("output.weight");
  REQUIRE(out != nullptr);
  CHECK(out->type == TensorType::kQ8_0);
  CHECK(out->ne[0] == 64);
  CHECK(out->ne[1] == shape.n_vocab);
  std::vector<uint8_t> expected =
      RefQuantizeQ8_0(head.values.data(), static_cast<int64_t>(head.values.size()));
  REQUIRE(out->nbytes == expected.size());
  CHECK(std::memcmp(out->data, expected.data(), expected.size()) == 0);
}

TEST_CASE("convert: checkpoints that do not fit give clear errors", "[convert]") {
  const TinyShape shape;
  auto convert_entries = [&](const std::vector<StEntry>& entries) {
    return Convert(WriteSafetensors(entries), shape, TensorType::kQ8_0);
  };
  std::vector<HfTensor> hf = TinyCheckpoint(shape);
  const std::vector<StEntry> good = EncodeAll(&hf, "F32", "");
  REQUIRE_NOTHROW(convert_entries(good));

  SECTION("missing tensor") {
    std::vector<StEntry> e = good;
    e.erase(e.begin() + 11);  // h.0.mlp.c_fc.bias
    REQUIRE_THROWS_WITH(convert_entries(e), Catch::Contains("missing tensor 'h.0.mlp.c_fc.bias'"));
  }
  SECTION("wrong shape") {
    std::vector<StEntry> e = good;
    e[4].shape = {3 * 64, 64};  // c_attn stored as nn.Linear instead of Conv1D
    REQUIRE_THROWS_WITH(
        convert_entries(e),
        Catch::Contains(
            "'h.0.attn.c_attn.weight' has shape [192, 64] but config.json implies [64, 192]"));
  }
  SECTION("wrong dtype") {
    std::vector<StEntry> e = good;
    e[3].dtype = "I32";  // h.0.ln_1.bias: same byte size, not a float type
    REQUIRE_THROWS_WITH(
        convert_entries(e),
        Catch::Contains("'h.0.ln_1.bias' has dtype I32; expected F32, F16 or BF16"));
  }
  SECTION("unexpected tensor") {
    std::vector<StEntry> e = good;
    e.push_back({"h.2.ln_1.weight", "F32", {64}, std::vector<uint8_t>(256)});
    REQUIRE_THROWS_WITH(convert_entries(e),
                        Catch::Contains("'h.2.ln_1.weight' is not part of a GPT-2 with 2 layers"));
  }
  SECTION("duplicate under both names") {
    std::vector<StEntry> e = good;
    e.push_back(e[1]);
    e.back().name = "transformer.wpe.weight";
    REQUIRE_THROWS_WITH(convert_entries(e), Catch::Contains("has tensor 'wpe.weight' twice"));
  }
  SECTION("offsets past the end of the file") {
    std::vector<uint8_t> st = WriteSafetensors(good);
    st.resize(st.size() - 10);
    REQUIRE_THROWS_WITH(Convert(st, shape, TensorType::kQ8_0),
                        Catch::Contains("past the end of the"));
  }
}

TEST_CASE("convert: the default general.name names OpenAI's four released shapes only",
          "[convert]") {
  // config.json of openai-community/gpt2 (small) and gpt2-xl, abridged to what the converter reads.
  const char* small = R"({"model_type": "gpt2", "n_layer": 12, "n_head": 12, "n_embd": 768,
      "n_positions": 1024, "vocab_size": 50257, "activation_function": "gelu_new"})";
  const char* xl = R"({"model_type": "gpt2", "n_layer": 48, "n_head": 25, "n_embd": 1600,
      "n_positions": 1024, "vocab_size": 50257})";
  CHECK(gpt2::Gpt2DefaultModelName(gpt2::ConfigFromHfJson(small)) == "GPT-2 small");
  CHECK(gpt2::Gpt2DefaultModelName(gpt2::ConfigFromHfJson(xl)) == "GPT-2 XL");
  gpt2::Config other = gpt2::ConfigFromHfJson(small);
  other.n_layer = 4;  // GPT-2 small with 4 blocks is no released model
  CHECK(gpt2::Gpt2DefaultModelName(other) == "");
}

TEST_CASE("convert: config.json parsing", "[convert]") {
  TinyShape s;
  gpt2::Config c = gpt2::ConfigFromHfJson(TinyConfigJson(s));
  CHECK(c.n_vocab == 96);
  CHECK(c.n_ctx == 16);
  CHECK(c.n_embd == 64);
  CHECK(c.n_head == 4);
  CHECK(c.n_layer == 2);
  CHECK(c.n_ff == 256);  // n_inner null: 4 * n_embd
  CHECK(c.ln_eps == 1e-5f);
  REQUIRE_THROWS_WITH(gpt2::ConfigFromHfJson("{\"n_layer\": 2}"),
                      Catch::Contains("config.json has no \"n_head\""));
  REQUIRE_THROWS_WITH(gpt2::ConfigFromHfJson("{\"model_type\": \"llama\"}"),
                      Catch::Contains("only GPT-2"));
  REQUIRE_THROWS_WITH(gpt2::ConfigFromHfJson("{\"activation_function\": \"relu\"}"),
                      Catch::Contains("activation_function \"relu\" is not supported"));
  REQUIRE_THROWS_WITH(
      gpt2::ConfigFromHfJson(
          "{\"n_layer\": 2, \"n_head\": 5, \"n_embd\": 64, \"vocab_size\": 9, \"n_positions\": 8}"),
      Catch::Contains("not divisible by n_head"));
  REQUIRE_THROWS_WITH(gpt2::ConfigFromHfJson("{\"n_layer\": -2}"),
                      Catch::Contains("positive integer"));
  REQUIRE_THROWS_WITH(gpt2::ParseConvertType("q5_0"),
                      Catch::Contains("expected f32, f16, q8_0 or q4_0"));
}

TEST_CASE("convert: round trip safetensors -> GGUF -> Model equals the weights written directly",
          "[convert]") {
  // The direct file is built here with the test's own names, transposes and reference
  // quantizer; the converted one by the converter. The model must compute the same logits.
  const TinyShape shape;
  for (TensorType type : {TensorType::kF32, TensorType::kQ8_0, TensorType::kQ4_0}) {
    INFO("type " << gpt2::GgmlTypeName(static_cast<uint32_t>(type)));
    std::vector<HfTensor> hf = TinyCheckpoint(shape, 5);
    Converted c = Convert(WriteSafetensors(EncodeAll(&hf, "F32", "")), shape, type);

    gpt2::GgufWriter direct;
    direct.AddString("general.architecture", "gpt2");
    direct.AddU32("gpt2.context_length", shape.n_ctx);
    direct.AddU32("gpt2.embedding_length", shape.n_embd);
    direct.AddU32("gpt2.feed_forward_length", shape.n_ff);
    direct.AddU32("gpt2.block_count", shape.n_layer);
    direct.AddU32("gpt2.attention.head_count", shape.n_head);
    direct.AddF32("gpt2.attention.layer_norm_epsilon", 1e-5f);
    for (const HfTensor& t : hf) {
      int64_t rows = 0, cols = 0;
      std::vector<float> v = GgmlRowMajor(t, IsConv1D(t.name), &rows, &cols);
      const bool matrix = t.shape.size() == 2 && t.name != "wpe.weight";
      const TensorType want = matrix ? type : TensorType::kF32;
      std::vector<uint8_t> bytes = ExpectedBytes(v, rows, cols, want);
      std::vector<int64_t> ne = {cols};
      if (t.shape.size() == 2) ne.push_back(rows);
      direct.AddTensor(GgufName(t.name), want, ne, bytes.data(), bytes.size());
    }
    std::vector<uint8_t> direct_bytes = direct.Serialize();

    auto run = [](const uint8_t* data, size_t size) {
      std::shared_ptr<const gpt2::GgufFile> file = gpt2::GgufFile::Parse(data, size);
      auto model = gpt2::Model::FromGguf(file);
      gpt2::Session session(*model);
      const int ids[] = {3, 17, 95, 0, 42};
      const float* logits = session.Prefill(ids, 5);
      return std::vector<float>(logits, logits + model->config().n_vocab);
    };
    std::vector<float> a = run(c.bytes.data(), c.bytes.size());
    std::vector<float> b = run(direct_bytes.data(), direct_bytes.size());
    REQUIRE(a.size() == static_cast<size_t>(shape.n_vocab));
    float max_diff = 0;
    for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
    INFO("max |logit difference| " << max_diff);
    CHECK(max_diff == 0.0f);
    CHECK(std::isfinite(a[0]));
  }
}
