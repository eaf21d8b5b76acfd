// A set of per-block MLP transcoders in one GGUF (convert/sae_convert.h ConvertTranscoderDir:
// general.architecture "transcoders", block L's keys and tensors under "tc.L."), each bound as an
// Sae (sae.h) reading blocks.L.hook_resid_mid through the bare LayerNorm and standing in for
// blocks.L.hook_mlp_out. Any subset of the model's blocks may be present.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/config.h"
#include "sae/sae.h"

namespace gpt2 {

class TranscoderSet {
 public:
  // Binds every block present; gpt2::Error when the file is not a transcoder set, a block's
  // keys or tensors are missing or malformed, it is not a resid_mid -> mlp_out transcoder of its
  // own block, it has a block the model lacks, or tensors no block uses.
  TranscoderSet(std::shared_ptr<const GgufFile> file, const Config& model);

  // Block `layer`'s transcoder, or null when the set has none there.
  const Sae* block(int layer) const {
    return layer >= 0 && layer < static_cast<int>(blocks_.size()) ? blocks_[layer].get() : nullptr;
  }
  int n_layer() const { return static_cast<int>(blocks_.size()); }
  bool complete() const;  // every block of the model has one
  const GgufFile& file() const { return *file_; }

 private:
  std::shared_ptr<const GgufFile> file_;
  std::vector<std::unique_ptr<Sae>> blocks_;  // [model's n_layer]
};

// The GGUF key prefix of block `layer` ("tc.3").
std::string TranscoderPrefix(int layer);

// A transcoder GGUF mapped into memory (native tools).
std::shared_ptr<const TranscoderSet> LoadTranscoderFile(const std::string& path, const Config& model);

}  // namespace gpt2
