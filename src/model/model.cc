#include "model/model.h"

#include <string>

#include "base/error.h"
#include "format/gguf.h"

namespace gpt2 {

namespace {

std::string ShapeString(const GgufTensor& t) {
  std::string s = "[";
  for (int i = 0; i < t.n_dims; ++i) s += (i ? ", " : "") + std::to_string(t.ne[i]);
  return s + "]";
}

const GgufTensor& Require(const GgufFile& file, const std::string& name) {
  const GgufTensor* t = file.FindTensor(name);
  if (t == nullptr) throw Error("model is missing tensor '" + name + "'");
  return *t;
}

void CheckShape(const GgufTensor& t, int64_t ne0, int64_t ne1) {
  const bool ok = ne1 == 0 ? (t.n_dims == 1 && t.ne[0] == ne0)
                           : (t.n_dims == 2 && t.ne[0] == ne0 && t.ne[1] == ne1);
  if (!ok) {
    const std::string want = ne1 == 0
                                 ? "[" + std::to_string(ne0) + "]"
                                 : "[" + std::to_string(ne0) + ", " + std::to_string(ne1) + "]";
    throw Error("tensor '" + t.name + "' has shape " + ShapeString(t) + ", expected " + want);
  }
}

// Norm weights and biases are always F32 in llama.cpp's GPT-2 files; we rely on it.
const float* Vector(const GgufFile& file, const std::string& name, int64_t n) {
  const GgufTensor& t = Require(file, name);
  CheckShape(t, n, 0);
  if (t.type != TensorType::kF32) {
    throw Error("tensor '" + name + "' has type " + GgmlTypeName(static_cast<uint32_t>(t.type)) +
                "; vectors (norms, biases) must be f32");
  }
  return reinterpret_cast<const float*>(t.data);
}

// A matrix with `rows` outputs over `cols` inputs: ggml shape [cols, rows].
WeightView Matrix(const GgufFile& file, const std::string& name, int64_t cols, int64_t rows) {
  const GgufTensor& t = Require(file, name);
  CheckShape(t, cols, rows);
  return WeightView{t.type, t.data, rows, cols};
}

}  // namespace

std::unique_ptr<Model> Model::FromGguf(std::shared_ptr<const GgufFile> file,
                                       int64_t memory_budget_bytes) {
  auto model = std::unique_ptr<Model>(new Model());
  model->file_ = file;
  const GgufFile& f = *file;
  const Config c = Config::FromGguf(f);
  CheckMemoryBudget(c, f.size(), memory_budget_bytes);
  model->config_ = c;
  const int64_t C = c.n_embd, F = c.n_ff;
  model->token_embedding = Matrix(f, "token_embd.weight", C, c.n_vocab);
  model->position_embedding = Matrix(f, "position_embd.weight", C, c.n_ctx);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    BlockWeights b;
    b.ln1_g = Vector(f, p + "attn_norm.weight", C);
    b.ln1_b = Vector(f, p + "attn_norm.bias", C);
    b.qkv = Matrix(f, p + "attn_qkv.weight", C, 3 * C);
    b.qkv_b = Vector(f, p + "attn_qkv.bias", 3 * C);
    b.proj = Matrix(f, p + "attn_output.weight", C, C);
    b.proj_b = Vector(f, p + "attn_output.bias", C);
    b.ln2_g = Vector(f, p + "ffn_norm.weight", C);
    b.ln2_b = Vector(f, p + "ffn_norm.bias", C);
    b.fc = Matrix(f, p + "ffn_up.weight", C, F);
    b.fc_b = Vector(f, p + "ffn_up.bias", F);
    b.fc_proj = Matrix(f, p + "ffn_down.weight", F, C);
    b.fc_proj_b = Vector(f, p + "ffn_down.bias", C);
    model->blocks.push_back(b);
  }
  model->ln_f_g = Vector(f, "output_norm.weight", C);
  model->ln_f_b = Vector(f, "output_norm.bias", C);
  model->output = f.FindTensor("output.weight") ? Matrix(f, "output.weight", C, c.n_vocab)
                                                : model->token_embedding;
  return model;
}

int64_t Model::ParameterCount() const {
  int64_t n = 0;
  for (const GgufTensor& t : file_->tensors()) n += t.NumElements();
  return n;
}

int64_t Model::BlockParameterCount() const {
  int64_t n = 0;
  const std::string prefix = "blk.0.";
  for (const GgufTensor& t : file_->tensors()) {
    if (t.name.compare(0, prefix.size(), prefix) == 0) n += t.NumElements();
  }
  return n;
}

double Model::ForwardFlopsPerToken() const {
  const double C = config_.n_embd, F = config_.n_ff, V = config_.n_vocab;
  const double per_block = 3 * C * C + C * C + 2 * C * F;  // qkv, proj, fc, fc_proj
  return 2.0 * (config_.n_layer * per_block + V * C);
}

}  // namespace gpt2
