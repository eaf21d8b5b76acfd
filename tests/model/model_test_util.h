// Helpers shared by the model's golden tests: a model built in memory and an observer that keeps
// every activation by name ("blk0/ln1", "logits").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
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

struct ObservedTensor {
  std::vector<int64_t> shape;
  int pos0 = 0;
  std::vector<float> data;
};

// Keeps the last activation reported under each name; blocks' tensors as "blk<L>/<name>".
class Collector {
 public:
  gpt2::ActivationObserver Observer() {
    return [this](const gpt2::Activation& a) {
      const std::string key =
          a.layer >= 0 ? "blk" + std::to_string(a.layer) + "/" + a.name : std::string(a.name);
      ObservedTensor& t = tensors[key];
      t.shape.assign(a.shape, a.shape + a.n_dims);
      t.pos0 = a.pos0;
      int64_t n = 1;
      for (int i = 0; i < a.n_dims; ++i) n *= a.shape[i];
      t.data.assign(a.data, a.data + n);
    };
  }
  std::map<std::string, ObservedTensor> tensors;
};

}  // namespace gpt2_test
