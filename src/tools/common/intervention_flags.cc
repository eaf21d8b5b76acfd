#include "tools/common/intervention_flags.h"

#include <cmath>
#include <memory>
#include <utility>

#include "sae/sae.h"

namespace gpt2 {

const char* const kInterventionFlags[8] = {"ablate-heads", "skip-attn", "skip-mlp", "no-residual",
                                           "post-norm",    "sae",       "steer",    "clamp"};

namespace {

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    parts.push_back(
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

// A non-negative decimal integer, or -1 when `s` is not one.
int ParseIndex(const std::string& s) {
  if (s.empty() || s.size() > 6) return -1;
  int v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return -1;
    v = v * 10 + (ch - '0');
  }
  return v;
}

int CheckedIndex(const std::string& flag, const std::string& text, const char* what, int count) {
  const int v = ParseIndex(text);
  if (v < 0) {
    throw UsageError("--" + flag + ": '" + text + "' is not a " + what + " number");
  }
  if (v >= count) {
    throw UsageError("--" + flag + ": " + what + " " + text + " is out of range; valid " + what +
                     "s are 0.." + std::to_string(count - 1));
  }
  return v;
}

std::vector<int> Layers(const Args& args, const std::string& flag, const Config& c) {
  std::vector<int> layers;
  if (!args.Has(flag)) return layers;
  for (const std::string& part : SplitCommas(args.Get(flag))) {
    layers.push_back(CheckedIndex(flag, part, "layer", c.n_layer));
  }
  return layers;
}

// F:X[,F:X...] for the SAE's features.
std::vector<std::pair<int, float>> FeatureValues(const Args& args, const std::string& flag,
                                                 const Sae& sae) {
  std::vector<std::pair<int, float>> out;
  if (!args.Has(flag)) return out;
  const char* what = flag == "steer" ? "F:ALPHA" : "F:VALUE";
  for (const std::string& part : SplitCommas(args.Get(flag))) {
    const size_t colon = part.find(':');
    if (colon == std::string::npos)
      throw UsageError("--" + flag + ": '" + part + "' is not " + what + " (e.g. 42:5)");
    const int f = ParseIndex(part.substr(0, colon));
    if (f < 0)
      throw UsageError("--" + flag + ": '" + part.substr(0, colon) + "' is not a feature number");
    if (f >= sae.d_sae()) {
      throw UsageError("--" + flag + ": feature " + std::to_string(f) +
                       " is out of range; valid features are 0.." +
                       std::to_string(sae.d_sae() - 1));
    }
    const std::string number = part.substr(colon + 1);
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(number, &used);
    } catch (...) {
      used = 0;
    }
    if (number.empty() || used != number.size() || !std::isfinite(v)) {
      throw UsageError("--" + flag + ": '" + number + "' is not a number");
    }
    out.push_back({f, static_cast<float>(v)});
  }
  return out;
}

}  // namespace

Interventions InterventionsFromArgs(const Args& args, const Config& c) {
  Interventions iv;
  if (args.Has("ablate-heads")) {
    for (const std::string& part : SplitCommas(args.Get("ablate-heads"))) {
      const size_t dot = part.find('.');
      if (dot == std::string::npos) {
        throw UsageError("--ablate-heads: '" + part + "' is not LAYER.HEAD (e.g. 0.3)");
      }
      HeadRef h;
      h.layer = CheckedIndex("ablate-heads", part.substr(0, dot), "layer", c.n_layer);
      h.head = CheckedIndex("ablate-heads", part.substr(dot + 1), "head", c.n_head);
      iv.ablate_heads.push_back(h);
    }
  }
  iv.skip_attn = Layers(args, "skip-attn", c);
  iv.skip_mlp = Layers(args, "skip-mlp", c);
  iv.no_residual = Layers(args, "no-residual", c);
  iv.post_norm = args.Has("post-norm");
  if ((args.Has("steer") || args.Has("clamp")) && !args.Has("sae")) {
    throw UsageError("--steer and --clamp need --sae S.gguf");
  }
  if (args.Has("sae")) {
    std::shared_ptr<const Sae> sae;
    try {
      sae = LoadSaeFile(args.Get("sae"), c.n_embd);
    } catch (const Error& e) {
      throw UsageError(std::string("--sae: ") + e.what());
    }
    if (sae->config().layer >= c.n_layer) {
      throw UsageError("--sae: the SAE reads " + sae->config().hook_name +
                       " but the model has blocks 0.." + std::to_string(c.n_layer - 1));
    }
    const auto steer = FeatureValues(args, "steer", *sae),
               clamp = FeatureValues(args, "clamp", *sae);
    if (!steer.empty() || !clamp.empty()) iv.stream_edits.push_back(Sae::Edit(sae, steer, clamp));
  }
  return iv;
}

}  // namespace gpt2
