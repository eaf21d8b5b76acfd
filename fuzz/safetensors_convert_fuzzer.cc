// libFuzzer target: the converter's inputs. The input is a Hugging Face config.json and a
// safetensors checkpoint, as [u16 little-endian length of the JSON][JSON][safetensors]. Parses
// both, widens every tensor to f32, and converts to a GGUF in memory (Q8_0 or Q4_0 by the
// checkpoint's first byte) which must then parse back, and equal the streamed conversion's
// (Gpt2GgufStream from the header alone, fed the pieces it asks for, small ones). The only
// acceptable failure is gpt2::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "convert/convert.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "json_and_bytes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const JsonAndBytes input = SplitJsonAndBytes(data, size);
  const std::string& json = input.json;
  const uint8_t* st = input.bytes;
  const size_t st_size = input.size;
  try {
    std::unique_ptr<gpt2::SafetensorsFile> file = gpt2::SafetensorsFile::Parse(st, st_size);
    for (const gpt2::SafetensorsTensor& t : file->tensors()) {
      try {
        gpt2::ReadAsF32(t);
      } catch (const gpt2::Error&) {
      }
    }
    const gpt2::Config config = gpt2::ConfigFromHfJson(json);
    const gpt2::TensorType type =
        st_size > 0 && (st[0] & 1) ? gpt2::TensorType::kQ4_0 : gpt2::TensorType::kQ8_0;
    gpt2::GgufWriter writer;
    gpt2::BuildGpt2Gguf(*file, config, nullptr, type, &writer, nullptr);
    const std::vector<uint8_t> gguf = writer.Serialize();
    gpt2::GgufFile::Parse(gguf.data(), gguf.size());  // must not throw: we wrote it

    const uint64_t header_end = gpt2::SafetensorsFile::HeaderEnd(st, st_size, st_size);
    gpt2::Gpt2GgufStream stream(st, static_cast<size_t>(header_end), st_size, config, nullptr, type,
                                "", uint64_t{1} << 28, /*piece_bytes=*/64);
    while (!stream.done()) {
      const gpt2::Gpt2GgufStream::Range r = stream.next();
      if (r.bytes == 0 || r.offset + r.bytes > st_size) std::abort();
      const std::vector<uint8_t> piece(st + r.offset, st + r.offset + r.bytes);
      stream.Feed(piece.data(), piece.size());
    }
    if (stream.output_size() != gguf.size() ||
        std::memcmp(stream.output(), gguf.data(), gguf.size()) != 0) {
      std::abort();
    }
  } catch (const gpt2::Error&) {
  }
  return 0;
}
