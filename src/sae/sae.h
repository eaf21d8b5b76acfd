// A sparse autoencoder bound to its GGUF (convert/sae_convert.h's tensors, sae_config.h's
// metadata), as Model binds GPT-2's weights: encoding rows of the stream at its hook, decoding,
// the share of the stream it explains, and steering and clamping as a stream edit
// (model/run_options.h StreamEdit; the model knows nothing of SAEs, this code nothing of SIMD:
// the encoder is the engine's MatMul).
//
// SAELens's math on TransformerLens's GPT-2, whose stream is centred (each position's vector
// minus its mean over d_model), for a row x of our (uncentred) stream at the hook:
//   xc    = x - mean_d(x)
//   s     = std_d(xc) + 1e-5 (torch.std, unbiased) with normalize_activations "layer_norm", else 1
//   pre   = (xc / s - b_dec * apply_b_dec_to_input) @ W_enc + b_enc
//   f     = relu(pre)                                   standard
//           relu(pre) * (pre > threshold)               jumprelu
//           relu of the k largest pre, 0 elsewhere      topk (ties to the lower feature)
//   x_hat = (f @ W_dec + b_dec) * s                     (the reconstruction of xc)
//   explained = 1 - |xc - x_hat|^2 / |xc|^2
// A transcoder (sae_config.h TranscoderConfigFromJson; one block of a set, transcoders.h) is the
// same encoder on the bare LayerNorm of its stream, s = sqrt(var + 1e-5) (biased), and its output
// acts @ W_dec + b_dec is not scaled back: it stands in for another tensor (hook_mlp_out).
// Steering adds alpha * W_dec[F] * s to x, clamping (value - f_F) * W_dec[F] * s (the SAE's error
// is kept: x' = x + (value - f_F) * W_dec[F] in the SAE's units).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/aligned.h"
#include "format/gguf.h"
#include "kernels/kernels.h"
#include "model/run_options.h"
#include "sae/sae_config.h"

namespace gpt2 {

class Model;
class ThreadPool;

// The working memory of Sae::Encode and EncodeFeatures, owned by the caller and reused (its
// buffers only grow, so a token loop does not allocate): an Sae is shared, read-only, by the
// lab and every edit built from it, which may run on other threads.
struct SaeScratch {
  std::vector<float> in;        // [n, d_in]: the prepared rows
  std::vector<float> scales;    // [n], when the caller wants no scale
  std::vector<float> products;  // EncodeFeatures: [n, kMatMulRowGrain], or TopK's [n, d_sae]
  std::vector<int> order;       // TopK: features by pre-activation
  std::vector<float> kept;      // TopK: the k survivors' activations
};

class Sae {
 public:
  // Binds every tensor by name and checks shapes and types; d_model: the model's width, which
  // d_in must equal (gpt2::Error naming both otherwise). The file must outlive the Sae. prefix:
  // where its keys and tensors are ("sae": an SAE's file, whose every tensor must be its own;
  // "tc.L": block L of a transcoder set's, whose decoder may be F16 or quantized).
  Sae(std::shared_ptr<const GgufFile> file, int d_model, const std::string& prefix = "sae");

  const SaeConfig& config() const { return config_; }
  int d_sae() const { return config_.d_sae; }
  const GgufFile& file() const { return *file_; }
  // Throws gpt2::Error naming the range 0..d_sae-1.
  void CheckFeature(int feature) const;

  // Rows x [n, d_in] of the stream at the hook -> features [n, d_sae]; scale [n] (s above, may be
  // null). With a pool the encoder's product is split over its threads (model/matmul_on.h), to
  // the same bits.
  void Encode(const float* x, int n, float* features, float* scale, SaeScratch& scratch,
              ThreadPool* pool = nullptr) const;
  // Encode's activations of `features` [count] alone, acts [n, count], bit for bit (the encoder's
  // rows in whole kMatMulRowGrain groups, which MatMul rounds as in one call over all rows).
  // Standard and JumpReLU SAEs compute only the groups holding those features; a TopK SAE,
  // whose survivors depend on every feature, encodes all of them. scale [n] as Encode's.
  void EncodeFeatures(const float* x, int n, const int* features, int count, float* acts,
                      float* scale, SaeScratch& scratch) const;
  // A fixed set of features' encoder rows gathered into one matrix, for EncodeGathered.
  struct Gathered {
    std::vector<int> features;
    CacheLineVector<uint8_t> rows;  // [features.size()] rows of W_enc in its own type
    std::vector<float> bias;        // [features.size()] their b_enc
  };
  Gathered Gather(const std::vector<int>& features) const;  // throws for one out of range
  // EncodeFeatures's activations of g.features, acts [n, count], through one product by their
  // gathered rows: features scattered over the dictionary (a graph's 1,000 over GPT-2 small's
  // 24,576 a block) lie in as many kMatMulRowGrain-row groups, which EncodeFeatures multiplies
  // by whole. Equal to Encode's to the products' rounding (a row's dot is the same arithmetic;
  // a kernel tile may add in another order). A TopK SAE encodes every feature, as there.
  void EncodeGathered(const Gathered& g, const float* x, int n, float* acts, float* scale,
                      SaeScratch& scratch) const;
  // The reconstruction of n rows from Encode's features [n, d_sae] and scales [n], into out
  // [n, d_in]: an SAE's x_hat (above, the centred stream's), a transcoder's acts @ W_dec + b_dec
  // (what stands in for its out tensor; scale unused, may be null).
  void Decode(const float* features, const float* scale, int n, float* out) const;
  // explained (above) of row x [d_in] with its features [d_sae] and scale.
  double Explained(const float* x, const float* features, float scale) const;
  // [d_in]; an F32 decoder only (every SAE's): null for a transcoder's F16 or quantized one.
  const float* DecoderRow(int feature) const {
    return w_dec_ == nullptr ? nullptr : w_dec_ + int64_t(feature) * config_.d_in;
  }
  // Row `feature` of the encoder (W_enc[:, feature]) in f32, whatever its type, into out [d_in].
  void EncoderRowInto(int feature, float* out) const;
  // Row `feature` of the decoder in f32, whatever its type, into out [d_in].
  void DecoderRowInto(int feature, float* out) const;
  const float* decoder_bias() const { return b_dec_; }  // [d_in]
  // W_dec[f] @ W_U [n_vocab] for each f of features, as [features.size(), n_vocab]: with
  // TransformerLens's W_U, ln_f's weight folded in (diag(ln_f.weight) wte^T), as Neuronpedia's
  // logit weights; the model's own unembedding, one product for all of them.
  std::vector<float> LogitWeights(const Model& model, const std::vector<int>& features) const;
  // The same for the tokens [v0, v1) only, [features.size(), v1 - v0], into *logits (resized,
  // its memory kept from call to call), the product on `pool` (matmul_on.h: the same bits on
  // any number of threads, and, with v0 a multiple of kMatMulRowGrain, the whole product's).
  void LogitWeights(const Model& model, const std::vector<int>& features, int v0, int v1,
                    ThreadPool& pool, std::vector<float>* logits) const;

  // The SAE spliced in at its hook, as a stream edit: each row of a position >= first_position
  // becomes its reconstruction plus the row's mean (which the SAE, reading the centred stream,
  // leaves out, and every LayerNorm after removes), SAELens's spliced evaluation; the rows before
  // keep the model's stream (an <|endoftext|> at 0 that the SAE never learnt). No backward (a
  // backward pass through it refuses). Throws for a transcoder.
  static StreamEdit Splice(std::shared_ptr<const Sae> sae, int first_position);
  // Steering (feature, alpha) and clamping (feature, value), steering first, as a stream edit at
  // the SAE's hook, with its exact vector-Jacobian product for the backward pass (steering under
  // layer_norm scales with the stream; clamping subtracts the feature's own dependence on it). The
  // edit holds the Sae (shared) and its own scratch. Throws for a feature out of range.
  static StreamEdit Edit(std::shared_ptr<const Sae> sae,
                         const std::vector<std::pair<int, float>>& steer,
                         const std::vector<std::pair<int, float>>& clamp);

 private:
  // Steering's and clamping's working memory, the edit's own.
  struct EditScratch {
    std::vector<float> x, scale, acts;  // [rows, d_in], [rows], [rows, clamped features]
    SaeScratch sae;
  };
  // Edit's two steps in place on x [rows, d_in]: steering adds alpha s(x) W_dec[F]; clamping adds
  // (value - f_F(x)) s(x) W_dec[F] (acts [rows, clamped features] receives f).
  void Steer(const std::vector<std::pair<int, float>>& steer, int rows, float* x, float* scale,
             SaeScratch& scratch) const;
  void Clamp(const std::vector<std::pair<int, float>>& clamp, const std::vector<int>& features,
             int rows, float* x, float* acts, float* scale, SaeScratch& scratch) const;
  // Edit's vector-Jacobian product: g [rows, d_in] = dm/d(edited rows) becomes dm/d(x_in).
  void EditBackward(const std::vector<std::pair<int, float>>& steer,
                    const std::vector<std::pair<int, float>>& clamp,
                    const std::vector<int>& features, int rows, const float* x_in, float* g,
                    EditScratch& scratch) const;
  // s(x) of one row, with xc [d_in] = x - mean(x) and ds [d_in] = ds/dx.
  double ScaleGradient(const float* x, double* xc, double* ds) const;
  // xc / s - b_dec * apply into in [n, d_in], s into scale [n].
  void Prepare(const float* x, int n, float* in, float* scale) const;
  // The same into scratch.in (returned), the scale into `scale` or, if null, scratch.scales.
  const float* Prepare(const float* x, int n, float* scale, SaeScratch& scratch) const;
  // relu (standard) or relu with JumpReLU's threshold of `feature`, from its pre-activation.
  float Activate(float pre, int feature) const {
    if (threshold_ != nullptr && !(pre > threshold_[feature])) return 0.0f;
    return std::max(pre, 0.0f);
  }

  std::shared_ptr<const GgufFile> file_;
  SaeConfig config_;
  WeightView w_enc_;                  // [d_sae rows, d_in cols]
  const float* b_enc_ = nullptr;      // [d_sae]
  WeightView w_dec_view_;             // [d_sae rows, d_in cols]
  const float* w_dec_ = nullptr;      // [d_sae, d_in] when F32
  const float* b_dec_ = nullptr;      // [d_in]
  const float* threshold_ = nullptr;  // [d_sae], jumprelu only
};

// An SAE GGUF file mapped into memory (native tools), owned by the returned Sae.
std::shared_ptr<const Sae> LoadSaeFile(const std::string& path, int d_model);

}  // namespace gpt2
