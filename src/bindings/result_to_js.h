// The lab's results as the JS objects embind.cc's forwarders return (the shapes are the usage
// comment at the top of embind.cc): one converter per result type.
#pragma once

#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <algorithm>
#include <vector>

#include "bindings/js_calls.h"
#include "lab/compare.h"
#include "lab/head_scores.h"
#include "lab/lab.h"
#include "model/attribution.h"

namespace gpt2 {

// {position, target, contrast, names, values: Float64Array, logit} (model/attribution.h).
inline val AttributionToJs(const Attribution& a) {
  val names = val::array();
  std::vector<double> values;
  for (const AttributionComponent& c : a.components) {
    names.call<void>("push", val(c.name));
    values.push_back(c.value);
  }
  return Object({{"position", val(a.position)}, {"target", val(a.target)}, {"contrast", val(a.contrast)},
                 {"names", names}, {"values", CopyToJs(values)}, {"logit", val(a.logit)}});
}

// {repeat, nLayer, nHead, prev, dup, induction: Float64Array [n_layer * n_head], uniform: {prev, dup,
// induction}} (lab/head_scores.h).
inline val HeadScoresToJs(const HeadScores& s) {
  const UniformScores u = UniformHeadScores(s.repeat);
  return Object({{"repeat", val(s.repeat)}, {"nLayer", val(s.n_layer)}, {"nHead", val(s.n_head)},
                 {"prev", CopyToJs(s.prev)}, {"dup", CopyToJs(s.dup)}, {"induction", CopyToJs(s.induction)},
                 {"uniform", Object({{"prev", val(u.prev)}, {"dup", val(u.dup)}, {"induction", val(u.induction)}})}});
}

// {positions, agree, cos, rel, kl: Float64Array [n_layer], topA, topB: Int32Array [positions],
// headDrift: Float64Array [n_layer * n_head], attribution: {target, names, a, b: Float64Array}}
// (lab/compare.h).
inline val ComparisonToJs(const Comparison& r) {
  std::vector<double> cos, rel, kl, a, b;
  for (const BlockDrift& d : r.blocks) cos.push_back(d.cos), rel.push_back(d.rel), kl.push_back(d.kl);
  val names = val::array();
  for (size_t i = 0; i < r.attribution_a.components.size(); ++i) {
    names.call<void>("push", val(r.attribution_a.components[i].name));
    a.push_back(r.attribution_a.components[i].value);
    b.push_back(r.attribution_b.components[i].value);
  }
  return Object({{"positions", val(r.positions)}, {"agree", val(r.agree)}, {"cos", CopyToJs(cos)},
                 {"rel", CopyToJs(rel)}, {"kl", CopyToJs(kl)}, {"topA", CopyToJs(r.top_a)}, {"topB", CopyToJs(r.top_b)},
                 {"headDrift", CopyToJs(r.head_drift)},
                 {"attribution", Object({{"target", val(r.attribution_a.target)}, {"names", names},
                                         {"a", CopyToJs(a)}, {"b", CopyToJs(b)}})}});
}

// {position, target, contrast, values: Float64Array [T], total, delta} (lab/gradients.h).
inline val SaliencyToJs(const SaliencyResult& r) {
  return Object({{"position", val(r.position)}, {"target", val(r.target)}, {"contrast", val(r.contrast)},
                 {"values", CopyToJs(r.values)}, {"total", val(r.total)}, {"delta", val(r.delta)}});
}

// {target, contrast, tokens, heads: Float64Array [n_layer * n_head], residPre: Float64Array
// [n_layer * T], metric, metricCorrupt}
inline val AtpToJs(const AtpResult& r) {
  return Object({{"target", val(r.target)}, {"contrast", val(r.contrast)}, {"tokens", val(r.tokens)},
                 {"heads", CopyToJs(r.heads)}, {"residPre", CopyToJs(r.resid_pre)},
                 {"metric", val(r.metric_clean)}, {"metricCorrupt", val(r.metric_corrupt)}});
}

// {layer, head, query, key, values: Float64Array [T], total, score}
inline val ScoreSaliencyToJs(const ScoreSaliencyResult& r) {
  return Object({{"layer", val(r.spec.layer)}, {"head", val(r.spec.head)}, {"query", val(r.spec.query)},
                 {"key", val(r.spec.key)}, {"values", CopyToJs(r.values)}, {"total", val(r.total)},
                 {"score", val(r.score)}});
}

// {target, contrast, value, metric, metricPatched}
inline val ExactPatchToJs(const ExactPatchResult& r) {
  return Object({{"target", val(r.target)}, {"contrast", val(r.contrast)}, {"value", val(r.value)},
                 {"metric", val(r.metric_clean)}, {"metricPatched", val(r.metric_patched)}});
}

// {position, fromBlock, before, after: Float32Array [n_vocab], textBefore, textAfter}
inline val ExperimentToJs(const ExperimentResult& r) {
  return Object({{"position", val(r.position)}, {"fromBlock", val(r.from_block)},
                 {"before", CopyToJs(r.before)}, {"after", CopyToJs(r.after)},
                 {"textBefore", CopyToJs(r.text_before)}, {"textAfter", CopyToJs(r.text_after)}});
}

// {position, target, base, total}
inline val HeadSweepStartToJs(const HeadSweepStart& s) {
  return Object({{"position", val(s.position)}, {"target", val(s.target)}, {"base", val(s.base)},
                 {"total", val(s.total)}});
}

// {positions, total, answer, other, cleanDiff, corruptedDiff}
inline val PatchingStartToJs(const PatchingStart& s) {
  return Object({{"positions", val(s.positions)}, {"total", val(s.total)}, {"answer", val(s.answer)},
                 {"other", val(s.other)}, {"cleanDiff", val(s.clean_diff)}, {"corruptedDiff", val(s.corrupted_diff)}});
}

// {positions, total, target, contrast, clean, corrupt}: startPathPatch's and startSenderPaths'.
inline val PathPatchStartToJs(const PathPatchStart& s) {
  return Object({{"positions", val(s.positions)}, {"total", val(s.total)}, {"target", val(s.target)},
                 {"contrast", val(s.contrast)}, {"clean", val(s.clean)}, {"corrupt", val(s.corrupt)}});
}

// {patched, clean, corrupt, target, contrast}
inline val PathPatchToJs(const PathPatchResult& r) {
  return Object({{"patched", val(r.patched)}, {"clean", val(r.clean)}, {"corrupt", val(r.corrupt)},
                 {"target", val(r.target)}, {"contrast", val(r.contrast)}});
}

// {layers, indices: Int32Array, values: Float64Array}: the job's cells from `from` on.
inline val JobCellsToJs(const std::vector<JobCell>& cells, int from) {
  std::vector<int> layers, indices;
  std::vector<double> values;
  for (size_t i = std::max(0, from); i < cells.size(); ++i) {
    layers.push_back(cells[i].layer);
    indices.push_back(cells[i].index);
    values.push_back(cells[i].value);
  }
  return Object({{"layers", CopyToJs(layers)}, {"indices", CopyToJs(indices)}, {"values", CopyToJs(values)}});
}

}  // namespace gpt2
