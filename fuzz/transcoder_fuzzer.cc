// libFuzzer target: one transcoder block's files as gpt2-convert --transcoders reads them, the
// sae.json and the sae.safetensors as [u16 little-endian length of the JSON][JSON][safetensors]
// (json_and_bytes.h). Reads the block's config (sae/sae_config.h TranscoderConfigFromJson, from
// W_enc's shape), converts it as block 1 of a transcoder set in memory (Q8_0 or Q4_0 by the
// weights' first byte), binds the set for a model of 2 blocks of its width and encodes two rows
// and reads two decoder rows. The only acceptable failure is gpt2::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "convert/sae_convert.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "json_and_bytes.h"
#include "model/config.h"
#include "sae/transcoders.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const JsonAndBytes input = SplitJsonAndBytes(data, size);
  try {
    std::unique_ptr<gpt2::SafetensorsFile> file =
        gpt2::SafetensorsFile::Parse(input.bytes, input.size);
    const gpt2::SaeConfig config = gpt2::TranscoderPartConfig(*file, input.json, 1);
    // Keep an absurd but valid shape's allocations small: the weights must match it anyway.
    if (int64_t{config.d_in} * config.d_sae > (int64_t{1} << 20)) return 0;
    const gpt2::TensorType type =
        input.size > 0 && (input.bytes[0] & 1) ? gpt2::TensorType::kQ4_0 : gpt2::TensorType::kQ8_0;
    const gpt2::SaeGgufConversion conversion(
        {gpt2::SaeGgufPart{file.get(), config, input.json, "tc.1"}}, type);
    if (conversion.layout().size > (uint64_t{1} << 28)) return 0;
    std::vector<uint8_t> out(static_cast<size_t>(conversion.layout().size));
    conversion.WriteHeader(out.data());
    for (int i = 0; i < conversion.num_tensors(); ++i)
      conversion.EncodeTensor(i, out.data(), nullptr);
    std::shared_ptr<const gpt2::GgufFile> gguf(
        gpt2::GgufFile::Parse(out.data(), out.size()).release());
    gpt2::Config model;
    model.n_layer = 2;
    model.n_embd = config.d_in;
    const gpt2::TranscoderSet set(gguf, model);  // must not throw: we wrote it
    const gpt2::Sae* tc = set.block(1);
    if (tc == nullptr || set.block(0) != nullptr || tc->d_sae() != config.d_sae) std::abort();
    std::vector<float> x(size_t(2) * config.d_in), f(size_t(2) * config.d_sae), row(config.d_in);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
    gpt2::SaeScratch scratch;
    tc->Encode(x.data(), 2, f.data(), nullptr, scratch);
    tc->DecoderRowInto(config.d_sae - 1, row.data());
    tc->EncoderRowInto(0, row.data());
  } catch (const gpt2::Error&) {
  }
  return 0;
}
