// A set of per-block MLP transcoders in one GGUF (convert/sae_convert.h ConvertTranscoderDir:
// general.architecture "transcoders", block L's keys and tensors under "tc.L."), each bound as an
// Sae (sae.h) reading blocks.L.hook_resid_mid through the bare LayerNorm and standing in for
// blocks.L.hook_mlp_out. Any subset of the model's blocks may be present.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/config.h"
#include "model/run_options.h"
#include "sae/sae.h"

namespace gpt2 {

class TranscoderSet {
 public:
  // Binds every block present; gpt2::Error when the file is not a transcoder set, a block's
  // keys or tensors are missing or malformed, it is not a resid_mid -> mlp_out transcoder of its
  // own block, it has a block the model lacks, or tensors no block uses.
  TranscoderSet(std::shared_ptr<const GgufFile> file, const Config& model);
  // `base`'s blocks with `added`'s on top: a block in both is `added`'s. The page loads a set one
  // block at a time (each block streamed, converted and cached on its own), so a set may span
  // several files; the blocks keep their files alive.
  TranscoderSet(const TranscoderSet& base, const TranscoderSet& added);

  // Block `layer`'s transcoder, or null when the set has none there.
  const Sae* block(int layer) const {
    return layer >= 0 && layer < static_cast<int>(blocks_.size()) ? blocks_[layer].get() : nullptr;
  }
  int n_layer() const { return static_cast<int>(blocks_.size()); }
  bool complete() const;            // every block of the model has one
  std::vector<int> blocks() const;  // the blocks present, ascending

 private:
  std::vector<std::shared_ptr<const Sae>> blocks_;  // [model's n_layer]; each holds its file
};

// One feature of a set at one position, and the value it is clamped to (0: ablated).
struct TranscoderClamp {
  int layer, position, feature;
  float value;
};

// The clamps as stream edits at blocks.L.hook_mlp_out, as Sae's clamp (sae.h) is at its hook:
// x' = x + (value - a_f(n(resid_mid))) W_dec[f] at the clamp's position, a_f the feature's
// activation on this run's stream (so an earlier block's clamp moves it), the transcoder's error
// kept. Per block with clamps, two edits: one at hook_resid_mid that reads the activations (and
// leaves the stream as it is), one at hook_mlp_out that writes. No backward (a backward pass
// through them refuses). `set` must outlive the edits. gpt2::Error for a block without a
// transcoder, a feature or position out of range.
std::vector<StreamEdit> TranscoderClampEdits(const TranscoderSet& set,
                                             const std::vector<TranscoderClamp>& clamps, int n_ctx);

// Every block's transcoder of the set spliced in, a replacement model without its error terms:
// blocks.L.hook_mlp_out of each position >= first_position becomes the transcoder's output on
// this run's resid_mid (so an earlier block's error reaches a later block's input); the rows
// before keep the model's (an <|endoftext|> at 0). Per block, two edits as TranscoderClampEdits
// makes them (one reading resid_mid, one writing mlp_out). No backward. `set` must outlive them.
std::vector<StreamEdit> TranscoderSpliceEdits(const TranscoderSet& set, int first_position);

// The GGUF key prefix of block `layer` ("tc.3").
std::string TranscoderPrefix(int layer);

// A transcoder GGUF mapped into memory (native tools).
std::shared_ptr<const TranscoderSet> LoadTranscoderFile(const std::string& path,
                                                        const Config& model);
// A transcoder GGUF from bytes that it keeps (the page's, one block at a time).
std::shared_ptr<const TranscoderSet> TranscodersFromBytes(std::vector<uint8_t> bytes,
                                                          const Config& model);

}  // namespace gpt2
