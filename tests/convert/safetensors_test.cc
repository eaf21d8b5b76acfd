// The safetensors reader: well-formed files parse to the right views, malformed ones give
// errors that say what is wrong.
#include "format/safetensors.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "convert_test_util.h"
#include "format/json.h"

using convert_test::StEntry;
using convert_test::WriteSafetensors;
using gpt2::SafetensorsFile;

namespace {

std::vector<uint8_t> WithHeader(const std::string& header, size_t data_bytes = 0) {
  std::vector<uint8_t> out = convert_test::HeaderBytes(header, data_bytes);
  out.resize(out.size() + data_bytes, 0);
  return out;
}

std::unique_ptr<SafetensorsFile> Parse(const std::vector<uint8_t>& b) {
  return SafetensorsFile::Parse(b.data(), b.size(), "test.safetensors");
}

}  // namespace

TEST_CASE("safetensors: parses tensors, shapes, dtypes and metadata", "[convert]") {
  std::vector<StEntry> entries = {
      {"a", "F32", {2, 3}, std::vector<uint8_t>(24)},
      {"b.bias", "F16", {4}, {0x00, 0x3C, 0x00, 0xC0, 0x00, 0x00, 0x00, 0x7C}},  // 1, -2, 0, inf
      {"c", "BF16", {2}, {0x80, 0x3F, 0x49, 0x40}},                              // 1, 3.140625
      {"mask", "BOOL", {1, 1, 2, 2}, {1, 0, 1, 1}},
      {"scalar", "I64", {}, std::vector<uint8_t>(8)},
  };
  entries[0].bytes[4 * 5 + 3] = 0x40;  // element 5 = 2.0f
  const auto bytes = WriteSafetensors(entries, "{\"format\":\"pt\"}");
  auto file = Parse(bytes);
  REQUIRE(file->tensors().size() == 5);
  REQUIRE(file->metadata().size() == 1);
  CHECK(file->metadata()[0].first == "format");
  CHECK(file->metadata()[0].second == "pt");
  const gpt2::SafetensorsTensor* a = file->Find("a");
  REQUIRE(a != nullptr);
  CHECK(a->shape == std::vector<int64_t>{2, 3});
  CHECK(a->nbytes == 24);
  std::vector<float> av = gpt2::ReadAsF32(*a);
  CHECK(av[5] == 2.0f);
  CHECK(av[0] == 0.0f);
  std::vector<float> bv = gpt2::ReadAsF32(*file->Find("b.bias"));
  CHECK(bv[0] == 1.0f);
  CHECK(bv[1] == -2.0f);
  CHECK(bv[2] == 0.0f);
  CHECK(std::isinf(bv[3]));
  std::vector<float> cv = gpt2::ReadAsF32(*file->Find("c"));
  CHECK(cv[0] == 1.0f);
  CHECK(cv[1] == 3.140625f);
  CHECK(file->Find("scalar")->NumElements() == 1);
  CHECK(file->Find("missing") == nullptr);
  REQUIRE_THROWS_WITH(gpt2::ReadAsF32(*file->Find("scalar")),
                      Catch::Contains("'scalar' has dtype I64; expected F32, F16 or BF16"));
}

TEST_CASE("safetensors: bad header length", "[convert]") {
  std::vector<uint8_t> tiny = {1, 2, 3};
  REQUIRE_THROWS_WITH(Parse(tiny), Catch::Contains("too short for the 8-byte"));

  auto b = WithHeader("{}");
  b[0] = 200;  // header length 200 > file
  REQUIRE_THROWS_WITH(Parse(b), Catch::Contains("runs past the end"));

  auto huge = WithHeader("{}");
  huge[7] = 0x40;  // 2^62
  REQUIRE_THROWS_WITH(Parse(huge), Catch::Contains("exceeds the 100,000,000-byte limit"));

  REQUIRE_THROWS_WITH(Parse(WithHeader("")), Catch::Contains("does not start with '{'"));
  REQUIRE_THROWS_WITH(Parse(WithHeader("PK\x03\x04")), Catch::Contains("does not start with '{'"));
}

TEST_CASE("safetensors: bad JSON", "[convert]") {
  const char* bad[] = {
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}",  // unterminated
      "{\"a\": {\"dtype\": F32}}",                                               // bare word
      "{\"a\" {}}",                                                              // missing ':'
      "{\"a\": {}, }",                                                           // trailing comma
      "{\"a\": \"\\q\"}",                                                        // bad escape
      "{} x",                                                                    // trailing data
      "{\"a\": {}, \"a\": {}}",                                                  // duplicate key
  };
  for (const char* h : bad) {
    INFO(h);
    REQUIRE_THROWS_WITH(Parse(WithHeader(h, 4)), Catch::Contains("invalid JSON at byte"));
  }
  std::string deep(100, '[');
  REQUIRE_THROWS_WITH(gpt2::ParseJson(deep, "deep"), Catch::Contains("nesting deeper than 64"));
}

TEST_CASE("safetensors: bad tensor entries", "[convert]") {
  struct Case {
    const char* header;
    size_t data;
    const char* message;
  };
  const Case cases[] = {
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
       "'w' has data_offsets [0, 8] past the end of the 4-byte data section"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,4]}}", 8, "begin > end"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
       "'w' is 8 bytes but F32 [3] needs 12"},
      {"{\"w\":{\"dtype\":\"F12\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
       "unknown dtype \"F12\""},
      {"{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "no \"dtype\""},
      {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "no \"shape\""},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8,
       "no \"data_offsets\" pair"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
       "not a non-negative integer"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8,
       "not a non-negative integer"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
       "element count overflows"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}}", 8,
       "unknown field \"extra\""},
      {"{\"w\":[1,2]}", 8, "'w' is not an object"},
      {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ value \"k\" is not a string"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
       8, "'a' and 'b' overlap"},
  };
  for (const Case& c : cases) {
    INFO(c.header);
    REQUIRE_THROWS_WITH(Parse(WithHeader(c.header, c.data)), Catch::Contains(c.message));
  }
}

TEST_CASE("safetensors: every truncation of a valid file fails cleanly", "[convert]") {
  std::vector<StEntry> entries = {{"x", "F32", {4}, std::vector<uint8_t>(16, 1)},
                                  {"y", "F16", {8}, std::vector<uint8_t>(16, 2)}};
  const auto bytes = WriteSafetensors(entries);
  REQUIRE_NOTHROW(Parse(bytes));
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    INFO("truncated to " << n);
    REQUIRE_THROWS_AS(Parse(cut), gpt2::Error);
  }
}

TEST_CASE("json: strings, numbers and escapes", "[convert]") {
  gpt2::JsonValue v = gpt2::ParseJson(
      "{\"s\": \"a\\u00e9\\ud83d\\ude00\\n\", \"i\": -12, \"f\": 1e-05, \"big\": 123456789012,"
      " \"t\": true, \"n\": null, \"arr\": [1, [2]]}",
      "test");
  CHECK(v.Find("s")->str == "a\xC3\xA9\xF0\x9F\x98\x80\n");
  CHECK(v.Find("i")->is_integer);
  CHECK(v.Find("i")->integer == -12);
  CHECK_FALSE(v.Find("f")->is_integer);
  CHECK(v.Find("f")->number == 1e-05);
  CHECK(v.Find("big")->integer == 123456789012LL);
  CHECK(v.Find("t")->boolean);
  CHECK(v.Find("n")->kind == gpt2::JsonValue::Kind::kNull);
  CHECK(v.Find("arr")->array.size() == 2);
  REQUIRE_THROWS_WITH(gpt2::ParseJson("\"\\ud800x\"", "test"),
                      Catch::Contains("unpaired surrogate"));
  REQUIRE_THROWS_WITH(gpt2::ParseJson("01", "test"), Catch::Contains("unexpected data"));
  REQUIRE_THROWS_WITH(gpt2::ParseJson("-", "test"), Catch::Contains("bad number"));
}
