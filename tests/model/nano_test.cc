// Our activation capture against the activations the llm-viz authors recorded from their PyTorch
// run of a trained minGPT (../shared/reference/llm-viz-nano, converted by
// scripts/make_nano_reference.py into tests/data/nano_sort.gguf and nano_sort_partials.bin).
// Unlike the synthetic golden, neither the weights nor the reference values come from us, and
// the model has a separate (untied) head, `output.weight`.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../test_paths.h"
#include "format/gguf.h"
#include "golden_file.h"
#include "model/session.h"
#include "model_test_util.h"

namespace gpt2_test {
namespace {

// Recorded on another machine with PyTorch's own kernels; values are O(1), three layers.
constexpr double kNanoTolerance = 1e-4;

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

TEST_CASE("llm-viz nano GPT: every recorded activation matches", "[model][nano]") {
  const GoldenFile& partials = GoldenData("nano_sort_partials.bin");
  std::unique_ptr<LoadedModel> loaded = LoadModelBytes(ReadBytes(DataPath("nano_sort.gguf")));
  const gpt2::Model& model = *loaded->model;
  CHECK(model.config().n_vocab == 3);
  CHECK(model.config().n_ctx == 11);
  CHECK(model.config().n_layer == 3);
  CHECK(model.config().n_head == 3);
  CHECK(model.config().n_embd == 48);
  // The untied head is bound, not the embedding.
  CHECK(model.output.data != model.token_embedding.data);

  const std::vector<int32_t>& ids32 = partials.I32("ids");
  const std::vector<int> ids(ids32.begin(), ids32.end());
  gpt2::Session session(model);
  gpt2::Recorder recorder;
  const float* last =
      session.Prefill(ids.data(), static_cast<int>(ids.size()), {recorder.Observer()});
  const std::map<std::string, ObservedTensor> seen = ByGoldenName(recorder);

  std::printf("-- llm-viz nano sort model vs recorded partials\n");
  int compared = 0;
  for (const auto& entry : partials.tensors()) {
    const std::string& name = entry.first;
    if (name == "ids" || name == "probs") continue;
    INFO(name);
    auto it = seen.find(name);
    REQUIRE(it != seen.end());
    CheckObservedAgainst(entry.second, name, it->second, kNanoTolerance);
    ++compared;
  }
  CHECK(compared == 19);

  // Softmax of our logits equals the recorded probabilities; the returned logits are the last row.
  const std::vector<float>& probs = partials.F32("probs");
  const std::vector<float>& logits = seen.at("logits").data;
  const int T = static_cast<int>(ids.size()), V = 3;
  std::vector<float> our_probs(logits.size());
  for (int t = 0; t < T; ++t) {
    double m = -INFINITY, sum = 0;
    for (int v = 0; v < V; ++v) m = std::fmax(m, logits[t * V + v]);
    for (int v = 0; v < V; ++v) sum += std::exp(logits[t * V + v] - m);
    for (int v = 0; v < V; ++v) our_probs[t * V + v] = std::exp(logits[t * V + v] - m) / sum;
  }
  CHECK(CheckTensor("probs", our_probs.data(), probs.data(), T * V, kNanoTolerance));
  CHECK(CheckTensor("returned logits", last, logits.data() + (T - 1) * V, V, 0.0));
}

TEST_CASE("llm-viz nano GPT: decoding one token at a time matches the recorded logits",
          "[model][nano]") {
  const GoldenFile& partials = GoldenData("nano_sort_partials.bin");
  std::unique_ptr<LoadedModel> loaded = LoadModelBytes(ReadBytes(DataPath("nano_sort.gguf")));
  const std::vector<int32_t>& ids = partials.I32("ids");
  const std::vector<float>& logits = partials.F32("logits");
  gpt2::Session session(*loaded->model);
  for (size_t t = 0; t < ids.size(); ++t) {
    INFO("position " << t);
    const float* step = session.Step(ids[t]);
    CHECK(CheckTensor("step logits", step, logits.data() + t * 3, 3, kNanoTolerance));
  }
}

}  // namespace
}  // namespace gpt2_test
