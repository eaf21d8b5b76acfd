// libFuzzer target: the dashboards' corpus reader (lab/corpus.h) and its windows. Input:
//   byte 0   bit 0: the format (0 .txt, 1 .jsonl); bits 1-7: the piece size the file is fed in
//            (1..128 bytes)
//   byte 1   the longest line accepted: 0 the reader's own limit, else 8 * byte 1 bytes (so that
//            the limit is met within libFuzzer's inputs)
//   byte 2   the windows' context (1..256), byte 3 max_tokens (0: no limit)
//   the rest the file: JSON lines, broken UTF-8, long lines, separators.
// The file read whole and read in pieces must give the same documents, or the same gpt2::Error
// (the only acceptable failure); the windows must cut the documents' tokens in order, none longer
// than the context, none empty, no more than max_tokens in all. The tokenizer is GPT-2's, from
// the committed small model's file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/text.h"
#include "format/gguf.h"
#include "lab/corpus.h"
#include "tokenizer/tokenizer.h"

namespace {

const gpt2::Tokenizer& Gpt2Tokenizer() {
  static const std::unique_ptr<gpt2::Tokenizer> tokenizer = [] {
    const std::string bytes =
        gpt2::ReadWholeFile(GPT2_SOURCE_DIR "/weights/gpt2-tiny-q8_0.gguf", "model");
    const auto file =
        gpt2::GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    return gpt2::Tokenizer::FromGguf(*file);
  }();
  return *tokenizer;
}

// The documents, or the error's message after "ERROR:".
std::vector<std::string> Read(gpt2::CorpusFormat format, size_t max_line, const uint8_t* data,
                              size_t size, size_t piece) {
  gpt2::CorpusReader reader(format, "fuzz", max_line);
  std::vector<std::string> docs;
  try {
    for (size_t at = 0; at < size; at += piece)
      reader.Feed(reinterpret_cast<const char*>(data) + at, std::min(piece, size - at), &docs);
    reader.Finish(&docs);
  } catch (const gpt2::Error& e) {
    return {std::string("ERROR:") + e.what()};
  }
  return docs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const gpt2::CorpusFormat format =
      (data[0] & 1) ? gpt2::CorpusFormat::kJsonLines : gpt2::CorpusFormat::kText;
  const size_t piece = 1 + (data[0] >> 1);
  const size_t max_line = data[1] == 0 ? gpt2::kMaxCorpusLine : size_t{8} * data[1];
  const int context = 1 + data[2];
  const int64_t max_tokens = data[3] == 0 ? -1 : data[3];
  const uint8_t* file = data + 4;
  const size_t n = size - 4;
  const std::vector<std::string> whole = Read(format, max_line, file, n, n == 0 ? 1 : n);
  if (Read(format, max_line, file, n, piece) != whole) std::abort();
  if (!whole.empty() && whole[0].rfind("ERROR:", 0) == 0) return 0;

  const gpt2::Tokenizer& tokenizer = Gpt2Tokenizer();
  gpt2::CorpusWindows windows(tokenizer, context, max_tokens);
  std::vector<int> expected;
  for (const std::string& d : whole) {
    if (d.empty()) std::abort();  // empty documents are dropped
    windows.AddDocument(d);
    const std::vector<int> ids = tokenizer.Encode(d);
    expected.insert(expected.end(), ids.begin(), ids.end());
  }
  if (max_tokens >= 0 && static_cast<int64_t>(expected.size()) > max_tokens)
    expected.resize(static_cast<size_t>(max_tokens));
  if (windows.n_tokens() != static_cast<int64_t>(expected.size())) std::abort();
  int64_t at = 0;
  for (int64_t w = 0; w < windows.size(); ++w) {
    const int len = windows.length(w);
    if (len < 1 || len > context) std::abort();
    for (int i = 0; i < len; ++i) {
      if (windows.ids(w)[i] != expected[at + i]) std::abort();
    }
    at += len;
  }
  if (at != windows.n_tokens()) std::abort();
  return 0;
}
