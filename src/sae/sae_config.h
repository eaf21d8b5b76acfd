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
enum class SaeNormalize { kNone, kLayerNorm };

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
};

// Throws gpt2::Error.
SaeConfig SaeConfigFromJson(const std::string& json_text);
// "blocks.L.hook_<point>" -> (layer, point); throws naming the five hook points accepted.
void ParseSaeHook(const std::string& hook_name, int* layer, StreamPoint* point);

const char* SaeStreamPointName(StreamPoint p);       // "resid_pre", ..., "mlp_out" (hook_<name>)
const char* SaeArchitectureName(SaeArchitecture a);  // "standard", "jumprelu", "topk"
const char* SaeNormalizeName(SaeNormalize n);        // "none", "layer_norm"

// GGUF metadata: general.architecture "sae", sae.hook_name, sae.architecture, sae.k,
// sae.apply_b_dec_to_input, sae.normalize_activations, sae.d_in, sae.d_sae, and the original
// cfg.json text as sae.cfg_json (empty when there was none).
void AddSaeMetadata(GgufWriter& writer, const SaeConfig& config, const std::string& cfg_json);
// Throws gpt2::Error when the file is not an SAE GGUF or its keys are out of range.
SaeConfig SaeConfigFromGguf(const GgufFile& file);

}  // namespace gpt2
