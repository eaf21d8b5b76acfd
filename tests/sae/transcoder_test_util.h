// The test transcoders of scripts/make_golden.py (tests/data/transcoders, the public GPT-2 small
// set's layout), read as gpt2-convert --transcoders reads a folder and converted in memory; shared
// by the graph's and the dashboard's tests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../test_paths.h"
#include "base/text.h"
#include "convert/sae_convert.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "sae/transcoders.h"

namespace gpt2_test {

// The test set's blocks, read as gpt2-convert --transcoders reads a folder, converted in memory.
struct TranscoderFiles {
  std::vector<std::string> bytes, json;
  std::vector<std::unique_ptr<gpt2::SafetensorsFile>> weights;
  std::vector<gpt2::SaeGgufPart> parts;
  TranscoderFiles() {
    for (int l = 0; l < 2; ++l) {
      const std::string dir = DataPath("transcoders/" + gpt2::TranscoderFolder(l));
      bytes.push_back(gpt2::ReadWholeFile(dir + "/sae.safetensors", "weights"));
      json.push_back(gpt2::ReadWholeFile(dir + "/sae.json", "sae.json"));
    }
    for (int l = 0; l < 2; ++l) {
      weights.push_back(gpt2::SafetensorsFile::Parse(
          reinterpret_cast<const uint8_t*>(bytes[l].data()), bytes[l].size(), "sae.safetensors"));
      parts.push_back(gpt2::SaeGgufPart{weights[l].get(),
                                        gpt2::TranscoderPartConfig(*weights[l], json[l], l),
                                        json[l], gpt2::TranscoderPrefix(l)});
    }
  }
};

inline std::shared_ptr<const gpt2::GgufFile> Convert(const std::vector<gpt2::SaeGgufPart>& parts,
                                                     gpt2::TensorType type) {
  const gpt2::SaeGgufConversion conversion(parts, type);
  auto buffer = std::make_shared<std::vector<uint8_t>>(conversion.layout().size);
  conversion.WriteHeader(buffer->data());
  for (int i = 0; i < conversion.num_tensors(); ++i)
    conversion.EncodeTensor(i, buffer->data(), nullptr);
  std::unique_ptr<gpt2::GgufFile> parsed = gpt2::GgufFile::Parse(buffer->data(), buffer->size());
  return std::shared_ptr<const gpt2::GgufFile>(parsed.release(),
                                               [buffer](const gpt2::GgufFile* f) { delete f; });
}

}  // namespace gpt2_test
