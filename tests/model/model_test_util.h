// Helpers shared by the model's golden tests: a model built in memory and the recorded
// activations by the golden files' names ("blk0/ln1", "logits").
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/tensor_type.h"
#include "golden_file.h"
#include "model/capture.h"
#include "model/model.h"
#include "model/observer.h"

namespace gpt2_test {

// A Model over a GGUF held in memory (the GgufFile points into `bytes`, so they live together).
struct LoadedModel {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const gpt2::GgufFile> file;
  std::unique_ptr<gpt2::Model> model;
};

inline std::unique_ptr<LoadedModel> LoadModelBytes(std::vector<uint8_t> bytes) {
  auto loaded = std::make_unique<LoadedModel>();
  loaded->bytes = std::move(bytes);
  loaded->file = gpt2::GgufFile::Parse(loaded->bytes.data(), loaded->bytes.size());
  loaded->model = gpt2::Model::FromGguf(loaded->file);
  return loaded;
}

// The tiny synthetic model (tools/common/synthetic_model.h TinyTestConfig, no tokenizer) with
// matrices of `type`, built on first use and kept for the whole test program: one per type,
// whichever test file asks (model_test_util.cc).
const gpt2::Model& TinyModel(gpt2::TensorType type = gpt2::TensorType::kF32);

struct ObservedTensor {
  std::vector<int64_t> shape;
  int pos0 = 0;
  std::vector<float> data;
};

// What a gpt2::Recorder kept, by the golden files' names: blocks' tensors as "blk<L>/<name>",
// the others by name ("logits"); the last tensor reported under a name wins.
inline std::map<std::string, ObservedTensor> ByGoldenName(const gpt2::Recorder& recorder) {
  std::map<std::string, ObservedTensor> out;
  for (const gpt2::RecordedTensor& r : recorder.tensors()) {
    const std::string key = r.layer >= 0 ? "blk" + std::to_string(r.layer) + "/" + r.name : r.name;
    ObservedTensor& t = out[key];
    t.shape = r.shape;
    t.pos0 = r.pos0;
    t.data = r.data;
  }
  return out;
}

// Rows [t0, t0 + T) of a golden [.., T_all, last] tensor whose time axis is `time_axis`
// ([T, X]: axis 0; [H, T, X]: axis 1), keeping only the first `last` entries of the last axis.
inline std::vector<float> SliceTime(const GoldenTensor& g, int time_axis, int64_t t0, int64_t T,
                                    int64_t last) {
  const int64_t outer = time_axis == 0 ? 1 : g.dims[0];
  const int64_t t_all = g.dims[time_axis];
  const int64_t width = g.dims.back();
  std::vector<float> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t t = t0; t < t0 + T; ++t) {
      const float* row = g.f32.data() + (o * t_all + t) * width;
      out.insert(out.end(), row, row + last);
    }
  }
  return out;
}

// Compares one observed tensor covering positions [pos0, pos0 + T) of a prompt with the golden
// of the whole prompt. Scores are compared on the causal part only (key j <= query position).
inline void CheckObservedAgainst(const GoldenTensor& g, const std::string& key,
                                 const ObservedTensor& seen, double tolerance) {
  REQUIRE(seen.shape.size() == g.dims.size());
  const bool per_head = g.dims.size() == 3;
  const int time_axis = per_head ? 1 : 0;
  const int64_t T = seen.shape[time_axis];
  const bool scores = key.find("attn_scores") != std::string::npos;
  const bool keyed = scores || key.find("attn_probs") != std::string::npos;
  // Expected shape: the golden's, with T rows and, for scores/probs, pos0 + T keys.
  std::vector<int64_t> expected_shape = g.dims;
  expected_shape[time_axis] = T;
  if (keyed) expected_shape.back() = seen.pos0 + T;
  REQUIRE(seen.shape == expected_shape);
  const std::vector<float> expected = SliceTime(g, time_axis, seen.pos0, T, expected_shape.back());
  std::vector<float> actual = seen.data;
  std::vector<float> reference = expected;
  if (scores) {
    // Masked entries are -inf by observer.h's contract, but only the causal part has values.
    const int64_t n_keys = expected_shape.back();
    std::vector<float> a, e;
    const int64_t heads = expected_shape[0];
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t j = 0; j <= seen.pos0 + t; ++j) {
          a.push_back(actual[(h * T + t) * n_keys + j]);
          e.push_back(reference[(h * T + t) * n_keys + j]);
        }
      }
    }
    actual.swap(a);
    reference.swap(e);
  }
  CHECK(CheckTensor(key, actual.data(), reference.data(), static_cast<int64_t>(actual.size()),
                    tolerance));
}

}  // namespace gpt2_test
