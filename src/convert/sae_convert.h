// SAELens sparse autoencoder (cfg.json + sae_weights.safetensors) -> one GGUF holding the SAE and
// its configuration (sae/sae_config.h's metadata), read by src/sae/sae.h. The same plan for the
// CLI (`gpt2-convert --sae DIR`) and the page's Converter binding (setSaeConfig, planSae).
//
// Tensors (SAELens shapes; ggml ne in brackets, ne[0] contiguous):
//   W_enc [d_in, d_sae]  -> sae.W_enc  [d_in, d_sae]: transposed, one row of d_in per feature, so
//                           that encoding is the engine's matmul x @ W^T; stored as --type (a row
//                           length not a multiple of 32 falls back to F16, as the GPT-2 converter).
//   b_enc [d_sae]        -> sae.b_enc, F32
//   W_dec [d_sae, d_in]  -> sae.W_dec  [d_in, d_sae]: one row per feature, always F32
//   b_dec [d_in]         -> sae.b_dec, F32
//   threshold [d_sae]    -> sae.threshold, F32 (JumpReLU only; required there, refused elsewhere)
// Why only the encoder is quantized: it is the one matrix multiplied by every position (a matmul
// the int8 kernels do fast, and a feature's activation rounded a little keeps its rank); the
// decoder is read a row at a time — steering and clamping add alpha * W_dec[F] to the stream,
// logit weights are W_dec[F] @ W_U, the reconstruction sums the few active rows — so rounding it
// would move the model's own stream and the reported directions for no speed. Biases and the
// threshold are small and decide which features fire: F32 like every bias of the model.
// Transcoders (`gpt2-convert --transcoders DIR`): DIR holds one folder per block L,
// gpt2-small-dun-chl-mlp-tc{L}/ with sae.json and sae.safetensors in the layout above (no
// threshold); every block present goes into one GGUF, general.architecture "transcoders", block
// L's metadata and tensors under "tc.L." (sae/transcoders.h reads them). Unlike an SAE's, their
// decoder is stored as --type too: the graph (graph/replacement.h) reads every active feature's
// decoder row, never one steered vector, and GPT-2 small's 12 x 24,576 x 768 decoders in f32 are
// 906 MB alone, past the 700 MB the page allows the whole set; Q8_0 makes encoders and decoders
// 241 MB each (482 MB), F16 453 MB each. --type f32 keeps them exact (the tests' choice).
// Dtypes F32, F16 and BF16 are read; any other tensor, a missing one or a shape that does not
// match cfg.json is a gpt2::Error naming it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/tensor_type.h"
#include "sae/sae_config.h"

namespace gpt2 {

class SafetensorsFile;
struct SafetensorsTensor;

// One SAE, or one block of a transcoder set, to convert: its tensors go under `prefix`.
struct SaeGgufPart {
  const SafetensorsFile* weights = nullptr;
  SaeConfig config;
  std::string cfg_json;
  std::string prefix;  // "sae", or "tc.L" (sae/transcoders.h TranscoderPrefix)
};

class SaeGgufConversion {
 public:
  // Makes every check and fixes the output's layout. `weights` must outlive this object.
  SaeGgufConversion(const SafetensorsFile& weights, const SaeConfig& config,
                    const std::string& cfg_json, TensorType type);
  // A transcoder set: every part a transcoder block (general.architecture "transcoders").
  SaeGgufConversion(const std::vector<SaeGgufPart>& parts, TensorType type);
  const GgufWriter::Layout& layout() const { return layout_; }
  int num_tensors() const { return static_cast<int>(tensors_.size()); }
  void WriteHeader(uint8_t* file) const;
  // Tensor i (and the padding after it) into file, a buffer of layout().size bytes.
  void EncodeTensor(int i, uint8_t* file, std::ostream* log) const;

  struct Planned {
    std::string gguf_name;
    const SafetensorsTensor* source = nullptr;
    bool transpose = false;
    std::vector<int64_t> ne;
    TensorType type = TensorType::kF32;
  };
  const Planned& planned(int i) const { return tensors_.at(i); }

 private:
  void Plan(const SaeGgufPart& part, TensorType type);
  std::vector<Planned> tensors_;
  GgufWriter::Layout layout_;
};

// The whole conversion into one buffer (at most max_bytes), one tensor per call (the page's
// Converter.planSae / convertNext / takeOutput).
class SaeGgufInMemory {
 public:
  SaeGgufInMemory(const SafetensorsFile& weights, const SaeConfig& config,
                  const std::string& cfg_json, TensorType type, uint64_t max_bytes);
  // A transcoder set (the page converts one block at a time: one part).
  SaeGgufInMemory(const std::vector<SaeGgufPart>& parts, TensorType type, uint64_t max_bytes);
  SaeGgufInMemory(const SaeGgufInMemory&) = delete;
  SaeGgufInMemory& operator=(const SaeGgufInMemory&) = delete;
  int num_tensors() const { return conversion_.num_tensors(); }
  uint64_t size() const { return conversion_.layout().size; }
  int ConvertNext();              // returns the tensors done so far
  const uint8_t* output() const;  // throws unless every tensor was converted

 private:
  void Begin(uint64_t max_bytes);
  SaeGgufConversion conversion_;
  std::vector<uint8_t> output_;
  int done_ = 0;
};

// Reads DIR/cfg.json and DIR/sae_weights.safetensors and writes output_path atomically.
void ConvertSaeDir(const std::string& dir, const std::string& output_path, TensorType type,
                   std::ostream* log);
// The folder of block `layer` in a transcoder DIR: "gpt2-small-dun-chl-mlp-tc{layer}".
std::string TranscoderFolder(int layer);
// A transcoder block's config from its sae.json text (may be empty) and weights: shapes from
// W_enc (gpt2::Error when absent or not 2-D), then sae/sae_config.h TranscoderConfigFromJson.
SaeConfig TranscoderPartConfig(const SafetensorsFile& weights, const std::string& sae_json,
                               int layer);
// Every DIR/gpt2-small-dun-chl-mlp-tc{L}/ (L = 0..99; sae.json, sae.safetensors) present into one
// GGUF at output_path, written atomically; gpt2::Error when none is.
void ConvertTranscoderDir(const std::string& dir, const std::string& output_path, TensorType type,
                          std::ostream* log);

}  // namespace gpt2
