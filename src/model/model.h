// A GPT-2 model bound to the tensors of a GGUF file (tensor names as llama.cpp writes them);
// model/session.h runs it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "format/gguf.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/observer.h"
#include "model/run_options.h"

namespace gpt2 {

class ThreadPool;

struct BlockWeights {
  const float* ln1_g;   // [C]
  const float* ln1_b;   // [C]
  WeightView qkv;       // [3C rows, C cols]
  const float* qkv_b;   // [3C]
  WeightView proj;      // [C, C]
  const float* proj_b;  // [C]
  const float* ln2_g;
  const float* ln2_b;
  WeightView fc;           // [F, C]
  const float* fc_b;       // [F]
  WeightView fc_proj;      // [C, F]
  const float* fc_proj_b;  // [C]
};

class Model {
 public:
  // Binds every tensor by name and checks its shape and type against the config; norms and
  // biases must be F32. The GgufFile (and the buffer under it) must outlive the Model.
  // Rejects a config whose buffers do not fit memory_budget_bytes (CheckMemoryBudget), so a
  // Session built on the model never computes a wrapped size.
  static std::unique_ptr<Model> FromGguf(std::shared_ptr<const GgufFile> file,
                                         int64_t memory_budget_bytes = DefaultMemoryBudget());

  const Config& config() const { return config_; }
  const GgufFile& file() const { return *file_; }
  int64_t ParameterCount() const;       // all tensors
  int64_t BlockParameterCount() const;  // one block
  double ForwardFlopsPerToken() const;  // 2 * multiply-adds of the matmuls, at position 0

  WeightView token_embedding;     // [V, C]
  WeightView position_embedding;  // [n_ctx, C]
  std::vector<BlockWeights> blocks;
  const float* ln_f_g = nullptr;
  const float* ln_f_b = nullptr;
  WeightView output;  // the tied embedding unless the file has `output`

 private:
  Config config_;
  std::shared_ptr<const GgufFile> file_;
};

// The logit lens: each block's residual stream (and the final one) put through the final
// LayerNorm and the unembedding, to see what the model "would predict" after each block.
struct LensEntry {
  int layer;                     // 0..n_layer-1: after that block
  int position;                  // absolute position
  std::vector<int> top_ids;      // most probable first
  std::vector<float> top_probs;  // softmax over the full vocabulary
};
// residuals: [n_layer][T, C] as observed in "resid_out"; returns n_layer * T entries.
std::vector<LensEntry> LogitLens(const Model& model,
                                 const std::vector<std::vector<float>>& residuals, int T, int pos0,
                                 int top_k);

}  // namespace gpt2
