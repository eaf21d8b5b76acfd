// libFuzzer target: a model file as the page and the CLI open it. GGUF parse, Config and the
// memory budget, weight binding, tokenizer build, and (when all of that accepts the file) one
// forward step, so the binding's promises (shapes, extents) are checked by the kernels reading
// through them under AddressSanitizer, and sampling from its logits. The only acceptable
// failure is gpt2::Error.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/error.h"
#include "format/gguf.h"
#include "model/sampler.h"
#include "model/session.h"
#include "tokenizer/tokenizer.h"

// Small enough that a fuzzed config cannot make one step slow or exhaust the fuzzer's memory.
constexpr int64_t kFuzzMemoryBudget = int64_t{64} << 20;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<const gpt2::GgufFile> file;
  try {
    file = gpt2::GgufFile::Parse(data, size);
  } catch (const gpt2::Error&) {
    return 0;
  }
  try {
    std::unique_ptr<gpt2::Tokenizer> tokenizer = gpt2::Tokenizer::FromGguf(*file);
    tokenizer->Decode(tokenizer->Encode("Hello world, it's 2026!"));
  } catch (const gpt2::Error&) {
  }
  try {
    std::unique_ptr<gpt2::Model> model = gpt2::Model::FromGguf(file, kFuzzMemoryBudget);
    gpt2::Session session(*model);
    const float* logits = session.Step(model->config().n_vocab - 1);
    // Fuzzed weights give any logits, NaN and infinities included: every sampling mode must
    // still return an id in range.
    for (const gpt2::SamplingParams& p :
         {gpt2::SamplingParams{0.0f, 0, 1.0f, 1}, gpt2::SamplingParams{0.8f, 40, 0.95f, 2}}) {
      gpt2::Sampler sampler(p);
      const int id = sampler.Sample(logits, model->config().n_vocab);
      if (id < 0 || id >= model->config().n_vocab) __builtin_trap();
    }
  } catch (const gpt2::Error&) {
  }
  return 0;
}
