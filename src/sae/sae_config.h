// The configuration of a sparse autoencoder (SAE) trained on one hook point of GPT-2, read from
// SAELens's cfg.json in the layouts the public files use, and kept in the SAE's GGUF as metadata
// (src/convert/sae_convert.h writes it, src/sae/sae.h reads it).
//
// cfg.json layouts read (keys of SAELens's SAE config classes):
//   SAELens 6:           metadata.hook_name, TopK's "k" at the top level;
//   SAELens 3-5:         top-level "hook_name", TopK's k in activation_fn_kwargs.k;
//   jbloom's Reformatted releases and older: top-level "hook_point" (also "hook_name" when both
//                        are written, and then they must agree).
// Accepted: architecture "standard" (ReLU; also when absent), "jumprelu", "topk" (with k in
// 1..d_sae); apply_b_dec_to_input true or false (absent: true, SAELens's default);
// normalize_activations "none" (also absent, null or false) or "layer_norm"; hook_name
// blocks.L.hook_resid_pre | hook_resid_mid | hook_resid_post | hook_attn_out | hook_mlp_out;
// d_in and d_sae positive. Anything else (another architecture or normalisation, a head index,
// rescaled TopK activations) is a gpt2::Error naming the unsupported thing.
#pragma once

#include <string>

#include "model/run_options.h"

namespace gpt2 {

class GgufFile;
class GgufWriter;

enum class SaeArchitecture { kStandard, kJumpRelu, kTopK };
// kBareLayerNorm: a transcoder's input, (x - mean) / sqrt(var + 1e-5) with var biased (GPT-2's
// LayerNorm without its gain and bias; TransformerLens's blocks.L.ln2.hook_normalized with the
// LayerNorm folded). Only transcoders read it (TranscoderConfigFromJson); SAELens's cfg.json never
// names it.
enum class SaeNormalize { kNone, kLayerNorm, kBareLayerNorm };

struct SaeConfig {
  std::string hook_name;  // "blocks.L.hook_<point>"
  int layer = 0;
  StreamPoint point = StreamPoint::kResidPre;
  SaeArchitecture architecture = SaeArchitecture::kStandard;
  int k = 0;  // TopK only
  bool apply_b_dec_to_input = true;
  SaeNormalize normalize = SaeNormalize::kNone;
  int d_in = 0;
  int d_sae = 0;
  // A transcoder reads the stream at `point` and writes (replaces) the tensor at out_point of the
  // same block: Dunefsky et al.'s MLP transcoders read hook_resid_mid (through kBareLayerNorm) and
  // stand in for hook_mlp_out. An SAE reconstructs what it reads: out_point == point.
  bool transcoder = false;
  StreamPoint out_point = StreamPoint::kResidPre;
};

// LayerNorm's eps of GPT-2 (and of TransformerLens's ln2), inside the transcoders' bare LayerNorm.
constexpr double kTranscoderLnEps = 1e-5;

// Throws gpt2::Error.
SaeConfig SaeConfigFromJson(const std::string& json_text);
// The sae.json of one block of Dunefsky, Chlenski and Nanda's GPT-2 small transcoders
// (jacobdunefsky/gpt2small-transcoders, folder gpt2-small-dun-chl-mlp-tc{layer}/), whose
// weights are W_enc [d_in, d_sae], b_enc, W_dec [d_sae, d_in], b_dec [d_in]:
//   n = (x - mean(x)) / sqrt(var(x) + 1e-5)  of x = blocks.L.hook_resid_mid (no gain, no bias)
//   acts = relu((n - b_dec * apply_b_dec_to_input) @ W_enc + b_enc);  recon = acts @ W_dec + b_dec
//   recon stands in for blocks.L.hook_mlp_out.
// The convention (bare LayerNorm input, no b_dec subtraction, ReLU) is the one third-party code
// using these files settled on by measurement; the sae.json itself could not be read offline, so
// its keys are read leniently, each only checked when present: d_in and d_sae (else from the
// weights' shapes: d_in, d_sae given here), hook_name / hook_point (blocks.L.ln2.hook_normalized
// or blocks.L.hook_resid_mid of this layer), out_hook_name / out_hook_point
// (blocks.L.hook_mlp_out), architecture / activation_fn(_str) (standard / relu), and
// apply_b_dec_to_input (absent: false, the trainer's transcoder default). Anything present and
// different is a gpt2::Error naming it. An empty text reads as "{}".
SaeConfig TranscoderConfigFromJson(const std::string& json_text, int layer, int d_in, int d_sae);
// "blocks.L.hook_<point>" -> (layer, point); throws naming the five hook points accepted.
void ParseSaeHook(const std::string& hook_name, int* layer, StreamPoint* point);

const char* SaeStreamPointName(StreamPoint p);       // "resid_pre", ..., "mlp_out" (hook_<name>)
const char* SaeArchitectureName(SaeArchitecture a);  // "standard", "jumprelu", "topk"
const char* SaeNormalizeName(SaeNormalize n);        // "none", "layer_norm", "bare_layer_norm"

// GGUF metadata under `prefix` ("sae" for an SAE's file; "tc.L" for block L in a transcoder set's,
// convert/sae_convert.h): hook_name, architecture, k, apply_b_dec_to_input, normalize_activations,
// d_in, d_sae, and the original cfg.json text as cfg_json (empty when there was none), each as
// prefix.key; a transcoder also out_hook_name.
// The caller writes general.architecture ("sae" or "transcoders").
void AddSaeMetadata(GgufWriter& writer, const SaeConfig& config, const std::string& cfg_json,
                    const std::string& prefix = "sae");
// Throws gpt2::Error when the keys are missing or out of range; with prefix "sae", also when
// general.architecture is not "sae".
SaeConfig SaeConfigFromGguf(const GgufFile& file, const std::string& prefix = "sae");

}  // namespace gpt2
