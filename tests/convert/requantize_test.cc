// Re-encoding a GGUF (src/convert/requantize.h) against the synthetic-model maker
// (tools/common/synthetic_model.h), which writes the same weights in each type straight from their
// f32 values: an F32 file re-encoded must equal the maker's file of that type byte for byte
// (metadata, layout, ggml's rounding).
#include "convert/requantize.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "../test_paths.h"
#include "base/error.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tools/common/synthetic_model.h"

namespace {

std::vector<uint8_t> Requantize(const std::vector<uint8_t>& source, gpt2::TensorType type) {
  const std::unique_ptr<gpt2::GgufFile> file = gpt2::GgufFile::Parse(source.data(), source.size());
  gpt2::GgufRequantizeInMemory job(*file, type, UINT64_MAX);
  int done = 0;
  while (job.ConvertNext() > done) ++done;
  CHECK(done == job.num_tensors());
  CHECK(job.done() == job.num_tensors());
  return job.TakeOutput();
}

TEST_CASE("An F32 GGUF re-encoded equals the same weights written in that type",
          "[convert][circuits]") {
  const std::unique_ptr<gpt2::Tokenizer> tokenizer =
      gpt2::Tokenizer::FromFiles(gpt2_test::EncoderJsonPath(), gpt2_test::VocabBpePath());
  for (const gpt2::Tokenizer* tok : {static_cast<const gpt2::Tokenizer*>(nullptr),
                                     static_cast<const gpt2::Tokenizer*>(tokenizer.get())}) {
    const std::vector<uint8_t> f32 =
        gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), gpt2::TensorType::kF32, tok);
    for (gpt2::TensorType type : {gpt2::TensorType::kQ8_0, gpt2::TensorType::kQ4_0,
                                  gpt2::TensorType::kF16, gpt2::TensorType::kF32}) {
      INFO("type " << int(type) << (tok ? " with" : " without") << " a tokenizer");
      const std::vector<uint8_t> want =
          gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), type, tok);
      CHECK(Requantize(f32, type) == want);
    }
  }
}

TEST_CASE("Re-encoding refuses an output over its budget and hands its output over once",
          "[convert][circuits]") {
  const std::vector<uint8_t> f32 =
      gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), gpt2::TensorType::kF32, nullptr);
  const std::unique_ptr<gpt2::GgufFile> file = gpt2::GgufFile::Parse(f32.data(), f32.size());
  CHECK_THROWS_WITH(gpt2::GgufRequantizeInMemory(*file, gpt2::TensorType::kQ8_0, 1000),
                    Catch::Contains("more than"));
  gpt2::GgufRequantizeInMemory job(*file, gpt2::TensorType::kQ8_0, UINT64_MAX);
  CHECK_THROWS_WITH(job.output(), Catch::Contains("not complete"));
  while (job.ConvertNext() < job.num_tensors()) {
  }
  const std::vector<uint8_t> bytes = job.TakeOutput();
  CHECK(bytes.size() == job.size());
  CHECK_THROWS(job.output());
}

}  // namespace
