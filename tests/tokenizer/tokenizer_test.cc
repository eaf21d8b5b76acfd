// GPT-2 tokenizer against independent references: js-tiktoken's ids for the corpus
// (tests/data/tokenizer_golden.json, written by scripts/gen_tokenizer_golden.mjs), the real GPT-2
// prompts in ../shared/reference, and byte-exact round trips of arbitrary bytes.
#include "tokenizer/tokenizer.h"

#include <catch2/catch.hpp>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "format/gguf.h"
#include "support/json.h"
#include "test_paths.h"

namespace {

using gpt2::Tokenizer;
using gpt2_test::At;
using gpt2_test::Json;
using gpt2_test::Numbers;
using gpt2_test::ReadJsonFile;

constexpr int kGpt2VocabSize = 50257;
constexpr int kEndOfText = 50256;

// Loaded once: building the pair table for 50k tokens is the slow part.
const Tokenizer& Gpt2() {
  static const std::unique_ptr<Tokenizer> tokenizer =
      Tokenizer::FromFiles(gpt2_test::EncoderJsonPath(), gpt2_test::VocabBpePath());
  return *tokenizer;
}

const Json& Golden() {
  static const Json golden = ReadJsonFile(gpt2_test::DataPath("tokenizer_golden.json"));
  return golden;
}

std::vector<int> Ids(const Json& array) {
  std::vector<int> ids;
  for (double v : Numbers(array)) ids.push_back(static_cast<int>(v));
  return ids;
}

// Pieces as strings, to make failures readable.
std::vector<std::string> TokenStrings(const Tokenizer& t, const std::vector<int>& ids) {
  std::vector<std::string> out;
  for (int id : ids) out.push_back(t.TokenBytes(id));
  return out;
}

// FNV-1a (32-bit) over each id's 4 little-endian bytes, as gen_tokenizer_golden.mjs computes it.
uint32_t Fnv1a32(const int* ids, size_t n) {
  uint32_t h = 0x811c9dc5u;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t id = static_cast<uint32_t>(ids[i]);
    for (int k = 0; k < 4; ++k) {
      h ^= (id >> (8 * k)) & 0xFFu;
      h *= 0x01000193u;
    }
  }
  return h;
}

}  // namespace

TEST_CASE("GPT-2 vocabulary loads from encoder.json and vocab.bpe", "[tokenizer]") {
  const Tokenizer& t = Gpt2();
  REQUIRE(t.vocab_size() == kGpt2VocabSize);
  CHECK(t.merges().size() == 50000);
  CHECK(t.tokens()[220] == "\xC4\xA0");  // U+0120, the byte alphabet's space
  CHECK(t.TokenBytes(220) == " ");
  CHECK(t.TokenBytes(198) == "\n");
  CHECK(t.TokenBytes(0) == "!");
  CHECK(t.TokenBytes(kEndOfText) == "<|endoftext|>");
  CHECK(t.tokens()[kEndOfText] == "<|endoftext|>");
  CHECK(t.TokenBytes(-1).empty());
  CHECK(t.TokenBytes(kGpt2VocabSize).empty());
  // Every byte has a single-byte token (encoder.py's bytes_to_unicode covers all 256).
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    const std::vector<int> ids = t.Encode(one);
    REQUIRE(ids.size() == 1);
    CHECK(t.TokenBytes(ids[0]) == one);
  }
}

TEST_CASE("Encode matches js-tiktoken gpt2 on the corpus", "[tokenizer]") {
  const Tokenizer& t = Gpt2();
  const Json& cases = At(Golden(), "cases");
  REQUIRE(cases.array.size() >= 200);
  size_t matched = 0;
  for (const Json& c : cases.array) {
    const std::string& text = At(c, "text").str;
    const std::vector<int> expected = Ids(At(c, "ids"));
    const std::vector<int> ids = t.Encode(text);
    INFO("text: \"" << text << "\"");
    CHECK(TokenStrings(t, ids) == TokenStrings(t, expected));
    CHECK(ids == expected);
    if (ids == expected) ++matched;
    // Plain-text encoding: the special token never appears.
    for (int id : ids) CHECK(id != kEndOfText);
  }
  CHECK(matched == cases.array.size());
}

TEST_CASE("Decode(Encode(s)) == s on the corpus", "[tokenizer]") {
  const Tokenizer& t = Gpt2();
  for (const Json& c : At(Golden(), "cases").array) {
    const std::string& text = At(c, "text").str;
    INFO("text: \"" << text << "\"");
    CHECK(t.Decode(t.Encode(text)) == text);
  }
}

TEST_CASE("Encode matches js-tiktoken on a ~300 KB text", "[tokenizer]") {
  const Tokenizer& t = Gpt2();
  const Json& golden = Golden();
  const Json& big = At(golden, "big");
  const std::vector<Json>& cases = At(golden, "cases").array;
  const std::vector<Json>& separators = At(big, "separators").array;
  const int repeats = static_cast<int>(At(big, "repeats").number);
  std::string text;
  for (int rep = 0; rep < repeats; ++rep) {
    for (size_t i = 0; i < cases.size(); ++i) {
      text += At(cases[i], "text").str;
      text += separators[(i + rep) % separators.size()].str;
    }
  }
  REQUIRE(text.size() == static_cast<size_t>(At(big, "utf8_bytes").number));
  const std::vector<int> ids = t.Encode(text);
  CHECK(ids.size() == static_cast<size_t>(At(big, "num_ids").number));
  const size_t chunk = static_cast<size_t>(At(big, "chunk").number);
  const std::vector<Json>& digests = At(big, "chunk_fnv1a32").array;
  size_t chunks_matching = 0;
  for (size_t c = 0; c < digests.size(); ++c) {
    const size_t begin = c * chunk;
    if (begin >= ids.size()) break;
    const size_t n = std::min(chunk, ids.size() - begin);
    const uint32_t expected = static_cast<uint32_t>(digests[c].number);
    INFO("ids " << begin << ".." << begin + n);
    CHECK(Fnv1a32(ids.data() + begin, n) == expected);
    if (Fnv1a32(ids.data() + begin, n) == expected) ++chunks_matching;
  }
  CHECK(chunks_matching == digests.size());
  CHECK(t.Decode(ids) == text);
}

TEST_CASE("Encode matches real GPT-2 prompts in ../shared/reference", "[tokenizer]") {
  const Tokenizer& t = Gpt2();
  int found = 0;
  for (int n = 0; n < 8; ++n) {
    const std::string path =
        gpt2_test::SharedReferencePath("gpt2_example_" + std::to_string(n) + ".json");
    if (!std::ifstream(path)) continue;
    ++found;
    const Json example = ReadJsonFile(path);
    const std::string& prompt = At(example, "prompt").str;
    INFO(path << ": \"" << prompt << "\"");
    const std::vector<int> expected = Ids(At(example, "token_ids"));
    CHECK(t.Encode(prompt) == expected);
    CHECK(t.Decode(expected) == prompt);
    if (example.Find("tokens") != nullptr) {
      std::vector<std::string> tokens;
      for (const Json& s : At(example, "tokens").array) tokens.push_back(s.str);
      CHECK(TokenStrings(t, expected) == tokens);
    }
  }
  if (found == 0) {
    WARN("skipped: no gpt2_example_*.json in " << gpt2_test::SharedReferencePath(""));
  }
}

// The pattern's lookahead, spelled out: "\s+(?!\S)" leaves the last whitespace character of a
// run before a non-space to start the next piece, and takes a whole run at the end of the text.
// Expected tokens follow from the pattern and GPT-2's vocabulary (which has "\n\n" but no run of
// spaces), and agree with js-tiktoken.
TEST_CASE("Whitespace runs split as \\s+(?!\\S) says", "[tokenizer]") {
  const Tokenizer& t = Gpt2();
  auto tokens = [&](const std::string& s) { return TokenStrings(t, t.Encode(s)); };
  using V = std::vector<std::string>;
  CHECK(tokens("a\n\n\nb") == V{"a", "\n\n", "\n", "b"});  // pieces "\n\n", "\n"
  CHECK(tokens("a\n\nb") == V{"a", "\n", "\n", "b"});      // pieces "\n", "\n"
  CHECK(tokens("a\n\n b") == V{"a", "\n\n", " b"});        // pieces "\n\n", " b"
  CHECK(tokens("x    y") == V{"x", " ", " ", " ", " y"});  // pieces "   ", " y"
  CHECK(tokens("\tx") == V{"\t", "x"});
  CHECK(tokens("I'M don't") == V{"I", "'", "M", " don", "'t"});  // contractions: lowercase only
}

TEST_CASE("Encode/Decode round-trip arbitrary bytes, including invalid UTF-8", "[tokenizer]") {
  const Tokenizer& t = Gpt2();
  std::mt19937 rng(1234);
  // Fragments that stress the UTF-8 decoder: truncated, overlong, surrogate, out of range,
  // stray continuation bytes, and valid characters of every length and class.
  const std::vector<std::string> fragments = {
      "\x80",
      "\xBF",
      "\xC0\x80",
      "\xC1\xBF",
      "\xC2",
      "\xC3\xA9",
      "\xE0\x80\x80",
      "\xE0\xA0",
      "\xE2\x82\xAC",
      "\xED\xA0\x80",
      "\xED\x9F\xBF",
      "\xEF\xBB\xBF",
      "\xF0\x8F\xBF\xBF",
      "\xF0\x9F\x98\x80",
      "\xF4\x8F\xBF\xBF",
      "\xF4\x90\x80\x80",
      "\xF5",
      "\xFF",
      "\xFE",
      "\xC2\x85",
      "\xC2\xA0",
      "\xE3\x80\x80",
      " ",
      "  ",
      "\n",
      "\r\n",
      "\t",
      "'",
      "'s",
      "'ll",
      "a",
      "Z",
      "7",
      "\xD9\xA3",
      "!",
      "<|endoftext|>",
      "\x00",
  };
  int checked = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s;
    const int parts = static_cast<int>(rng() % 24);
    for (int p = 0; p < parts; ++p) {
      if (rng() % 2 == 0) {
        s += fragments[rng() % fragments.size()];
      } else {
        s.push_back(static_cast<char>(rng() & 0xFF));
      }
    }
    const std::vector<int> ids = t.Encode(s);
    for (int id : ids) REQUIRE((id >= 0 && id < kGpt2VocabSize && id != kEndOfText));
    const std::string back = t.Decode(ids);
    if (back != s) {
      FAIL_CHECK("round trip differs for " << s.size() << " random bytes");
    }
    ++checked;
  }
  CHECK(checked == 3000);
  // Long pieces take the heap path of the merge loop.
  std::string long_bytes;
  for (int i = 0; i < 20000; ++i) long_bytes.push_back(static_cast<char>(0x80 + rng() % 64));
  CHECK(t.Decode(t.Encode(long_bytes)) == long_bytes);
}

TEST_CASE("Decode takes any id sequence and skips unknown ids", "[tokenizer]") {
  const Tokenizer& t = Gpt2();
  CHECK(t.Decode({}).empty());
  CHECK(t.Decode({-1, INT_MIN, kGpt2VocabSize, INT_MAX}).empty());
  CHECK(t.Decode({15496, -7, 11, 99999999, 995}) == "Hello, world");
  std::mt19937 rng(99);
  for (int iter = 0; iter < 500; ++iter) {
    std::vector<int> ids;
    std::string expected;
    const int n = static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) {
      const int id = static_cast<int>(rng() % 60000) - 5000;  // some negative, some too large
      ids.push_back(id);
      if (id >= 0 && id < kGpt2VocabSize) expected += t.TokenBytes(id);
    }
    CHECK(t.Decode(ids) == expected);
  }
}

namespace {

// encoder.py bytes_to_unicode(), written out again so the tests do not lean on the tokenizer's
// own table.
uint32_t AlphabetCodepoint(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
  if (printable) return static_cast<uint32_t>(b);
  uint32_t n = 0;
  for (int c = 0; c < b; ++c) {
    if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE))) ++n;
  }
  return 256 + n;
}

std::string TempPath(const std::string& name) {
  static std::mt19937 rng(std::random_device{}());
  return "/tmp/gpt2_tokenizer_test_" + std::to_string(rng()) + "_" + name;
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
}

}  // namespace

TEST_CASE("FromFiles parses JSON escapes and merges files", "[tokenizer]") {
  // A tiny vocabulary: the 256 bytes written as \uXXXX escapes, two merges, one added token
  // given as a surrogate pair.
  std::string json = "{\n";
  for (int b = 0; b < 256; ++b) {
    char entry[32];
    std::snprintf(entry, sizeof(entry), "  \"\\u%04x\": %d,\n", AlphabetCodepoint(b), b);
    json += entry;
  }
  json += "  \"ab\": 256, \"abc\" : 257,\t\"\\ud83d\\ude00\": 258, \"\\u0120a\\/\\\"\": 259\n}\n";
  const std::string json_path = TempPath("vocab.json");
  const std::string merges_path = TempPath("merges.txt");
  WriteFile(json_path, json);
  WriteFile(merges_path, "#version: 0.2\r\na b\r\nab c\r\n\r\n\xC4\xA0 a\n");
  std::unique_ptr<Tokenizer> t;
  // "Ġ a" makes " a", which is not in this vocabulary.
  CHECK_THROWS_AS(Tokenizer::FromFiles(json_path, merges_path), gpt2::Error);
  WriteFile(merges_path, "#version: 0.2\r\na b\r\nab c\r\n\r\n");
  REQUIRE_NOTHROW(t = Tokenizer::FromFiles(json_path, merges_path));
  REQUIRE(t->vocab_size() == 260);
  CHECK(t->merges() == std::vector<std::string>{"a b", "ab c"});
  CHECK(t->TokenBytes(258) == "\xF0\x9F\x98\x80");  // outside the alphabet: kept as UTF-8
  CHECK(t->TokenBytes(259) == " a/\"");
  CHECK(t->Encode("abc") == std::vector<int>{257});
  CHECK(t->Encode("abd") == std::vector<int>{256, 'd'});
  CHECK(t->Encode("cab") == std::vector<int>{'c', 256});
  std::remove(json_path.c_str());
  std::remove(merges_path.c_str());
}

TEST_CASE("FromFiles and the constructor reject bad input with gpt2::Error", "[tokenizer]") {
  CHECK_THROWS_AS(Tokenizer::FromFiles("/nonexistent/encoder.json", gpt2_test::VocabBpePath()),
                  gpt2::Error);
  CHECK_THROWS_AS(Tokenizer::FromFiles(gpt2_test::EncoderJsonPath(), "/nonexistent/vocab.bpe"),
                  gpt2::Error);
  const std::string merges_path = TempPath("merges.txt");
  WriteFile(merges_path, "#version: 0.2\n");
  for (const char* bad : {"", "[]", "{", "{\"a\": }", "{\"a\": 0,}", "{\"a\": 1}",
                          "{\"a\": 0, \"b\": 0}", "{\"\\ud800\": 0}", "{\"\\q\": 0}",
                          "{\"a\": 0} x", "{\"a\": -1}", "{\"a\": 99999999999}", "{\"a\":0}"}) {
    const std::string json_path = TempPath("bad.json");
    WriteFile(json_path, bad);
    INFO("encoder.json: " << bad);
    // The last one is valid JSON but lacks 255 byte tokens.
    CHECK_THROWS_AS(Tokenizer::FromFiles(json_path, merges_path), gpt2::Error);
    std::remove(json_path.c_str());
  }
  std::remove(merges_path.c_str());
  // Constructor: missing byte tokens, malformed merge lines.
  CHECK_THROWS_AS(Tokenizer(std::vector<std::string>{"a", "b"}, {}), gpt2::Error);
  std::vector<std::string> bytes_only;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    const uint32_t cp = AlphabetCodepoint(b);
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    bytes_only.push_back(s);
  }
  CHECK_NOTHROW(Tokenizer(bytes_only, {}));
  CHECK_THROWS_AS(Tokenizer(bytes_only, {"ab"}), gpt2::Error);
  CHECK_THROWS_AS(Tokenizer(bytes_only, {"a  b"}), gpt2::Error);
  CHECK_THROWS_AS(Tokenizer(bytes_only, {"a b"}), gpt2::Error);  // "ab" not a token
  Tokenizer bytes_tokenizer(bytes_only, {});
  CHECK(bytes_tokenizer.Encode("hi!").size() == 3);
  CHECK(bytes_tokenizer.Decode(bytes_tokenizer.Encode("h\xFFi")) == "h\xFFi");
}

TEST_CASE("FromGguf reads tokenizer.ggml.tokens and merges", "[tokenizer]") {
  const Tokenizer& reference = Gpt2();
  gpt2::GgufWriter writer;
  writer.AddString("tokenizer.ggml.model", "gpt2");
  writer.AddStringArray("tokenizer.ggml.tokens", reference.tokens());
  writer.AddStringArray("tokenizer.ggml.merges", reference.merges());
  const std::vector<uint8_t> bytes = writer.Serialize();
  const std::unique_ptr<gpt2::GgufFile> file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
  const std::unique_ptr<Tokenizer> t = Tokenizer::FromGguf(*file);
  REQUIRE(t->vocab_size() == kGpt2VocabSize);
  CHECK(t->tokens() == reference.tokens());
  CHECK(t->merges() == reference.merges());
  // The same ids as js-tiktoken, through the GGUF path.
  for (const Json& c : At(Golden(), "cases").array) {
    INFO("text: \"" << At(c, "text").str << "\"");
    CHECK(t->Encode(At(c, "text").str) == Ids(At(c, "ids")));
  }

  // Another tokenizer model, or missing arrays, are named errors.
  gpt2::GgufWriter llama;
  llama.AddString("tokenizer.ggml.model", "llama");
  llama.AddStringArray("tokenizer.ggml.tokens", reference.tokens());
  llama.AddStringArray("tokenizer.ggml.merges", reference.merges());
  const std::vector<uint8_t> llama_bytes = llama.Serialize();
  CHECK_THROWS_AS(
      Tokenizer::FromGguf(*gpt2::GgufFile::Parse(llama_bytes.data(), llama_bytes.size())),
      gpt2::Error);
  gpt2::GgufWriter no_merges;
  no_merges.AddStringArray("tokenizer.ggml.tokens", reference.tokens());
  const std::vector<uint8_t> no_merges_bytes = no_merges.Serialize();
  CHECK_THROWS_AS(
      Tokenizer::FromGguf(*gpt2::GgufFile::Parse(no_merges_bytes.data(), no_merges_bytes.size())),
      gpt2::Error);
  gpt2::GgufWriter empty;
  empty.AddU32("general.alignment", 32);
  const std::vector<uint8_t> empty_bytes = empty.Serialize();
  CHECK_THROWS_AS(
      Tokenizer::FromGguf(*gpt2::GgufFile::Parse(empty_bytes.data(), empty_bytes.size())),
      gpt2::Error);
}
