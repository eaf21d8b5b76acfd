// JS values to and from the lab's sparse autoencoders (lab/features.h) for embind.cc's one-line
// forwarders (usage at the top of embind.cc and in /work/notes' contract: loadSae, dropSae, saes,
// saeFeatures, saeStrip, saeLogitWeights, interventions' `sae` field).
#pragma once

#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bindings/js_calls.h"
#include "lab/lab.h"

namespace gpt2 {

// A Uint8Array (or any typed array view of bytes) copied into C++ memory in one set().
inline std::vector<uint8_t> BytesFromJs(const val& bytes) {
  if (!Given(bytes)) throw Error("no bytes given");
  std::vector<uint8_t> out(bytes["length"].as<size_t>());
  val(emscripten::typed_memory_view(out.size(), out.data())).call<void>("set", bytes);
  return out;
}

// [[feature, x], ...]
inline std::vector<std::pair<int, float>> FeaturePairsFromJs(const val& v, const char* what) {
  std::vector<std::pair<int, float>> out;
  const int n = Given(v) ? v["length"].as<int>() : 0;
  for (int i = 0; i < n; ++i) {
    const std::vector<double> pair = List<double>(v[i]);
    if (pair.size() != 2 || pair[0] != static_cast<int>(pair[0])) {
      throw Error(std::string("SAE ") + what + " is given as [feature, number] pairs");
    }
    out.push_back({static_cast<int>(pair[0]), static_cast<float>(pair[1])});
  }
  return out;
}

// The interventions object's `sae: [{id, steer: [[feature, alpha], ...], clamp: [[feature, value], ...]}]`.
inline std::vector<SaeIntervention> SaeInterventionsFromJs(const val& v) {
  std::vector<SaeIntervention> out;
  const int n = Given(v) ? v["length"].as<int>() : 0;
  for (int i = 0; i < n; ++i) {
    SaeIntervention s;
    s.id = v[i]["id"].as<int>();
    s.steer = FeaturePairsFromJs(v[i]["steer"], "steering");
    s.clamp = FeaturePairsFromJs(v[i]["clamp"], "clamping");
    out.push_back(std::move(s));
  }
  return out;
}

// {id, hook, layer, point, dSae, architecture, k, normalize, bytes}
inline val SaeInfoToJs(const Lab& lab, int id) {
  const LoadedSae& s = lab.loaded_sae(id);
  const SaeConfig& c = s.sae->config();
  return Object({{"id", val(id)}, {"hook", val(c.hook_name)}, {"layer", val(c.layer)},
                 {"point", val(std::string(SaeStreamPointName(c.point)))}, {"dSae", val(c.d_sae)},
                 {"architecture", val(std::string(SaeArchitectureName(c.architecture)))}, {"k", val(c.k)},
                 {"normalize", val(std::string(SaeNormalizeName(c.normalize)))},
                 {"bytes", val(static_cast<double>(s.bytes.size()))}});
}

inline val SaeListToJs(const Lab& lab) {
  val out = val::array();
  for (int id : lab.sae_ids()) out.call<void>("push", SaeInfoToJs(lab, id));
  return out;
}

// {features: Int32Array, activations: Float32Array, explained}
inline val SaeFeaturesToJs(const SaeFeatureList& f) {
  return Object({{"features", CopyToJs(f.features)}, {"activations", CopyToJs(f.activations)},
                 {"explained", val(f.explained)}});
}

// [{promoted: Int32Array, promotedValues: Float32Array, suppressed, suppressedValues}, ...]
inline val SaeLogitWeightsToJs(const std::vector<SaeLogitWeights>& list) {
  val out = val::array();
  for (const SaeLogitWeights& w : list) {
    out.call<void>("push", Object({{"promoted", CopyToJs(w.promoted)}, {"promotedValues", CopyToJs(w.promoted_values)},
                                   {"suppressed", CopyToJs(w.suppressed)}, {"suppressedValues", CopyToJs(w.suppressed_values)}}));
  }
  return out;
}

}  // namespace gpt2
