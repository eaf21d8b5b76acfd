// The test SAEs of scripts/make_golden.py (tests/data/sae/<name>/), converted in memory as the
// page converts them; shared by the SAE tests and the backward's intervention tests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../test_paths.h"
#include "base/text.h"
#include "convert/sae_convert.h"
#include "format/safetensors.h"
#include "sae/sae_config.h"

namespace gpt2_test {

inline std::string SaeCfg(const std::string& name) {
  return gpt2::ReadWholeFile(DataPath("sae/" + name + "/cfg.json"), "cfg");
}

inline std::vector<uint8_t> ConvertSae(const std::string& name, gpt2::TensorType type) {
  const std::string json = SaeCfg(name);
  const std::string weights =
      gpt2::ReadWholeFile(DataPath("sae/" + name + "/sae_weights.safetensors"), "weights");
  std::unique_ptr<gpt2::SafetensorsFile> file = gpt2::SafetensorsFile::Parse(
      reinterpret_cast<const uint8_t*>(weights.data()), weights.size(), "sae_weights.safetensors");
  gpt2::SaeGgufInMemory conversion(*file, gpt2::SaeConfigFromJson(json), json, type,
                                   uint64_t{1} << 30);
  while (conversion.ConvertNext() < conversion.num_tensors()) {
  }
  return std::vector<uint8_t>(conversion.output(), conversion.output() + conversion.size());
}

}  // namespace gpt2_test
