#include "lab/probes.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace gpt2 {

std::vector<double> AblatedLogProbs(Conversation& c, const std::vector<HeadRef>& heads,
                                    int position, int target, const std::vector<float>& means) {
  c.RequirePlainCapture(position);
  c.RequireToken(target);
  std::vector<Interventions> probes(heads.size());
  for (size_t i = 0; i < heads.size(); ++i) {  // all checked before any runs
    probes[i].ablate_heads.push_back(heads[i]);
    probes[i].head_means = means;
    probes[i].Validate(c.config());
  }
  return ProbeLogProbs(c, static_cast<int>(heads.size()), {target}, [&](int i) {
    return c.Probe(probes[i], heads[i].layer, 0, position + 1, 0);
  });
}

std::vector<double> PatchedLogProbs(Conversation& c, int layer, const std::vector<int>& positions,
                                    const std::vector<float>& stream, const std::vector<int>& ids) {
  const size_t C = size_t(c.config().n_embd);
  if (ids.empty()) throw Error("patching: name at least one token id to measure");
  for (int id : ids) c.RequireToken(id);
  if (stream.size() != size_t(c.position()) * C) {
    throw Error("patching: the stream has " + std::to_string(stream.size()) + " values; " +
                std::to_string(c.position()) + " positions x " + std::to_string(C) + " wanted");
  }
  std::vector<Interventions> probes(positions.size());
  for (size_t i = 0; i < positions.size(); ++i) {  // all checked before any runs
    const int p = positions[i];
    c.RequirePlainCapture(p);
    probes[i].patches.push_back(
        {layer, p,
         std::vector<float>(stream.begin() + size_t(p) * C, stream.begin() + size_t(p + 1) * C)});
    probes[i].Validate(c.config());
  }
  return ProbeLogProbs(c, static_cast<int>(positions.size()), ids, [&](int i) {
    return c.Probe(probes[i], layer, positions[i], c.position(), positions[i]);
  });
}

std::vector<double> ProbeLogProbs(Conversation& c, int n, const std::vector<int>& ids,
                                  const std::function<const float*(int)>& row) {
  const Config& config = c.config();
  const size_t C = size_t(config.n_embd), V = size_t(config.n_vocab);
  const int rows = std::min(n, kProbeRows);
  std::vector<float> stream(size_t(rows) * C), logits(size_t(rows) * V);
  std::vector<double> out;
  out.reserve(size_t(n) * ids.size());
  for (int i0 = 0; i0 < n; i0 += kProbeRows) {
    const int k = std::min(kProbeRows, n - i0);
    for (int i = 0; i < k; ++i) std::copy_n(row(i0 + i), C, stream.data() + size_t(i) * C);
    c.FinalLogits(stream.data(), k, logits.data());
    for (int i = 0; i < k; ++i) {
      const float* r = logits.data() + size_t(i) * V;
      // One softmax normaliser per row: log p(id) = log p(ids[0]) + logit(id) - logit(ids[0]).
      const double first = LogProbability(r, config.n_vocab, ids[0]);
      for (int id : ids) out.push_back(first + (double(r[id]) - double(r[ids[0]])));
    }
  }
  return out;
}

}  // namespace gpt2
