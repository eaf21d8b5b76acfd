#include "model_test_util.h"

#include <map>
#include <memory>

#include "tools/common/synthetic_model.h"

namespace gpt2_test {

const gpt2::Model& TinyModel(gpt2::TensorType type) {
  static std::map<gpt2::TensorType, std::unique_ptr<LoadedModel>> built;
  std::unique_ptr<LoadedModel>& slot = built[type];
  if (!slot) {
    slot = LoadModelBytes(gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), type, nullptr));
  }
  return *slot->model;
}

}  // namespace gpt2_test
