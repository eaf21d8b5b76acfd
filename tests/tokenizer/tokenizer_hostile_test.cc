// The tokenizer on hostile input: model files without a tokenizer, and the inputs the fuzzers
// (fuzz/) found or exercise, kept here as regression tests.
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/error.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

TEST_CASE("a model file without a tokenizer is named as such", "[tokenizer]") {
  gpt2::GgufWriter writer;
  writer.AddString("general.architecture", "gpt2");
  const std::vector<uint8_t> bytes = writer.Serialize();
  const std::unique_ptr<gpt2::GgufFile> file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
  CHECK_THROWS_WITH(gpt2::Tokenizer::FromGguf(*file), Catch::Contains("has no tokenizer") &&
                                                          Catch::Contains("tokenizer.ggml.tokens"));
}

}  // namespace
