// libFuzzer target: the SAE converter's inputs. The input is a SAELens cfg.json and an
// sae_weights.safetensors, as [u16 little-endian length of the JSON][JSON][safetensors]. Parses
// the cfg (every layout of sae/sae_config.h), converts to an SAE GGUF in memory (Q8_0 or Q4_0
// by the weights' first byte), which must parse back and give the same configuration, and binds
// it as an Sae that encodes, steers and clamps two rows. The only acceptable failure is
// gpt2::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "convert/sae_convert.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "json_and_bytes.h"
#include "sae/sae.h"
#include "sae/sae_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const JsonAndBytes input = SplitJsonAndBytes(data, size);
  const std::string& json = input.json;
  const uint8_t* st = input.bytes;
  const size_t st_size = input.size;
  try {
    const gpt2::SaeConfig config = gpt2::SaeConfigFromJson(json);
    // Keep the allocations of an absurd but valid cfg small: the weights must match it anyway.
    if (int64_t{config.d_in} * config.d_sae > (int64_t{1} << 20)) return 0;
    std::unique_ptr<gpt2::SafetensorsFile> file = gpt2::SafetensorsFile::Parse(st, st_size);
    const gpt2::TensorType type =
        st_size > 0 && (st[0] & 1) ? gpt2::TensorType::kQ4_0 : gpt2::TensorType::kQ8_0;
    gpt2::SaeGgufInMemory conversion(*file, config, json, type, uint64_t{1} << 28);
    while (conversion.ConvertNext() < conversion.num_tensors()) {
    }
    std::unique_ptr<gpt2::GgufFile> gguf =
        gpt2::GgufFile::Parse(conversion.output(), conversion.size());
    const gpt2::SaeConfig back = gpt2::SaeConfigFromGguf(*gguf);  // must not throw: we wrote it
    if (back.hook_name != config.hook_name || back.d_sae != config.d_sae || back.k != config.k)
      std::abort();
    auto sae = std::make_shared<const gpt2::Sae>(
        std::shared_ptr<const gpt2::GgufFile>(std::move(gguf)), config.d_in);
    if (sae->config().d_sae != config.d_sae) std::abort();
    // Encode two rows (weights may be NaN or huge: the top-k must still stay in bounds) and run
    // the steering and clamping edit over them.
    std::vector<float> x(size_t(2) * config.d_in), f(size_t(2) * config.d_sae), scale(2);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
    gpt2::SaeScratch scratch;
    sae->Encode(x.data(), 2, f.data(), scale.data(), scratch);
    sae->Explained(x.data(), f.data(), scale[0]);
    gpt2::Sae::Edit(sae, {{0, 2.0f}}, {{config.d_sae - 1, 1.0f}}).edit(0, 2, x.data());
  } catch (const gpt2::Error&) {
  }
  return 0;
}
