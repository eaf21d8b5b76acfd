// The intervention cases of scripts/make_golden.py's intervention_cases(), built the same way
// from our own runs of the golden prompt `ids` (mean ablation's means) and of the patch source.
// Used by the intervention and the gradient golden tests.
#pragma once

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "model/capture.h"
#include "model/run_options.h"
#include "model/session.h"

namespace gpt2_test {

// The cases of make_golden.py's intervention_cases(), built the same way from our own runs.
inline std::map<std::string, gpt2::Interventions> InterventionCases(
    const gpt2::Model& model, const std::vector<int>& ids,
    const std::vector<int>& patch_source_ids) {
  const gpt2::Config& c = model.config();
  std::map<std::string, gpt2::Interventions> cases;
  const std::vector<gpt2::HeadRef> heads = {{0, 1}, {1, 3}};
  cases["ablate_zero"].ablate_heads = heads;
  // Mean ablation: the heads' means over the clean run's positions, from the capture store.
  gpt2::CaptureStore store;
  store.Init(model);
  {
    gpt2::Session session(model);
    store.Begin(0, static_cast<int>(ids.size()));
    session.Prefill(ids.data(), static_cast<int>(ids.size()), {store.Observer()});
    store.Commit();
  }
  cases["ablate_mean"].ablate_heads = heads;
  cases["ablate_mean"].head_means = store.HeadMeans();
  cases["skip_attn"].skip_attn = {1};
  cases["skip_mlp"].skip_mlp = {0};
  cases["no_residual"].no_residual = {1};
  cases["post_norm"].post_norm = true;
  {
    // Patch: the stream entering block 1 at position 3, from the run of another prompt.
    gpt2::Recorder source;
    gpt2::Session session(model);
    session.Prefill(patch_source_ids.data(), static_cast<int>(patch_source_ids.size()),
                    {source.Observer()});
    const gpt2::RecordedTensor* r = source.Find("resid_out", 0);
    REQUIRE(r != nullptr);
    gpt2::ResidPatch patch;
    patch.layer = 1;
    patch.position = 3;
    patch.value.assign(r->data.begin() + 3 * c.n_embd, r->data.begin() + 4 * c.n_embd);
    cases["patch"].patches.push_back(patch);
  }
  gpt2::Interventions& combined = cases["combined"];
  combined.ablate_heads = {{0, 0}, {1, 2}};
  combined.skip_mlp = {1};
  combined.no_residual = {0};
  return cases;
}

}  // namespace gpt2_test
