// libFuzzer target: the converter's inputs. The input is a Hugging Face config.json and a
// safetensors checkpoint, as [u16 little-endian length of the JSON][JSON][safetensors]. Parses
// both, widens every tensor to f32, and converts to a GGUF in memory (Q8_0 or Q4_0 by the
// checkpoint's first byte) which must then parse back. The only acceptable failure is
// gpt2::Error.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "convert/convert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t json_size = std::min<size_t>(data[0] | (data[1] << 8), size - 2);
  const std::string json(reinterpret_cast<const char*>(data + 2), json_size);
  const uint8_t* st = data + 2 + json_size;
  const size_t st_size = size - 2 - json_size;
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
  } catch (const gpt2::Error&) {
  }
  return 0;
}
