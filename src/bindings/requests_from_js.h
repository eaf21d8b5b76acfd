// The JS arguments of embind.cc's forwarders as the lab's request types: interventions, sampling
// settings, saliency and attribution patching choices (each names what it refuses).
#pragma once

#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "bindings/js_calls.h"
#include "bindings/sae_calls.h"
#include "lab/lab.h"

namespace gpt2 {

inline std::vector<HeadRef> HeadList(const val& v) {  // [[layer, head], ...]
  std::vector<HeadRef> heads;
  const int n = Given(v) ? v["length"].as<int>() : 0;
  for (int i = 0; i < n; ++i) {
    const std::vector<int> pair = List(v[i]);
    if (pair.size() != 2) throw Error("heads are given as [layer, head] pairs");
    heads.push_back({pair[0], pair[1]});
  }
  return heads;
}

inline LabInterventions InterventionsFromJs(const val& spec) {
  LabInterventions out;
  if (!Given(spec)) return out;
  Interventions& iv = out.iv;
  iv.ablate_heads = HeadList(spec["ablateHeads"]);
  iv.skip_attn = List(spec["skipAttn"]);
  iv.skip_mlp = List(spec["skipMlp"]);
  iv.no_residual = List(spec["noResidual"]);
  iv.post_norm = spec["postNorm"].isTrue();
  const val patches = spec["patches"];
  const int n = Given(patches) ? patches["length"].as<int>() : 0;
  for (int i = 0; i < n; ++i) {
    const val p = patches[i];
    iv.patches.push_back({p["layer"].as<int>(), p["position"].as<int>(), List<float>(p["value"])});
  }
  iv.head_means = List<float>(spec["headMeans"]);
  out.mean_ablation = spec["meanAblation"].isTrue();
  out.sae = SaeInterventionsFromJs(spec["sae"]);
  return out;
}

inline SamplingParams Sampling(double temperature, int top_k, double top_p, double seed) {
  if (!(seed >= 0)) {  // a JS number: integers up to 2^53 are exact
    throw Error("Sampling settings out of range: temperature >= 0, top-k >= 0, 0 < top-p <= 1, seed >= 0.");
  }
  return {static_cast<float>(temperature), top_k, static_cast<float>(top_p), static_cast<uint64_t>(seed)};
}

inline SamplingParams SamplingFromJs(const val& s) {
  return Sampling(s["temperature"].as<double>(), s["topK"].as<int>(), s["topP"].as<double>(), s["seed"].as<double>());
}

inline SaliencyRequest SaliencyRequestOf(int p, int target, int contrast, const std::string& method, int steps) {
  if (method != "grad" && method != "ig") throw Error("The saliency method must be grad or ig, not '" + method + "'.");
  SaliencyRequest r;
  r.position = p;
  r.target = target;
  r.contrast = contrast;
  r.method = method == "ig" ? SaliencyMethod::kIntegrated : SaliencyMethod::kGradient;
  r.steps = steps;
  return r;
}

inline AtpCell AtpCellOf(const std::string& kind) {
  if (kind != "head" && kind != "resid") throw Error("The cell kind must be head or resid, not '" + kind + "'.");
  return kind == "head" ? AtpCell::kHead : AtpCell::kResidPre;
}

}  // namespace gpt2
