#include "sae/sae.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"
#include "model/model.h"
#include "model/top_k.h"

namespace gpt2 {

namespace {

const GgufTensor& Bind(const GgufFile& f, const std::string& name, int64_t ne0, int64_t ne1, bool f32) {
  const GgufTensor* t = f.FindTensor(name);
  if (t == nullptr) throw Error("SAE GGUF has no tensor '" + name + "'");
  const int want_dims = ne1 > 0 ? 2 : 1;
  if (t->n_dims != want_dims || t->ne[0] != ne0 || (ne1 > 0 && t->ne[1] != ne1)) {
    throw Error("SAE tensor '" + name + "' has the wrong shape for its configuration");
  }
  if (f32 && t->type != TensorType::kF32) throw Error("SAE tensor '" + name + "' must be F32");
  return *t;
}

}  // namespace

Sae::Sae(std::shared_ptr<const GgufFile> file, int d_model) : file_(std::move(file)) {
  config_ = SaeConfigFromGguf(*file_);
  const SaeConfig& c = config_;
  if (c.d_in != d_model) {
    throw Error("the SAE reads vectors of " + std::to_string(c.d_in) + " numbers (d_in) but the model's stream has " +
                std::to_string(d_model) + "; it was trained on another model");
  }
  const GgufTensor& enc = Bind(*file_, "sae.W_enc", c.d_in, c.d_sae, false);
  w_enc_ = WeightView{enc.type, enc.data, c.d_sae, c.d_in};
  b_enc_ = reinterpret_cast<const float*>(Bind(*file_, "sae.b_enc", c.d_sae, 0, true).data);
  w_dec_ = reinterpret_cast<const float*>(Bind(*file_, "sae.W_dec", c.d_in, c.d_sae, true).data);
  b_dec_ = reinterpret_cast<const float*>(Bind(*file_, "sae.b_dec", c.d_in, 0, true).data);
  if (c.architecture == SaeArchitecture::kJumpRelu) {
    threshold_ = reinterpret_cast<const float*>(Bind(*file_, "sae.threshold", c.d_sae, 0, true).data);
  }
  const size_t expected = c.architecture == SaeArchitecture::kJumpRelu ? 5 : 4;
  if (file_->tensors().size() != expected) throw Error("SAE GGUF has tensors its architecture does not use");
}

void Sae::CheckFeature(int feature) const {
  if (feature < 0 || feature >= config_.d_sae) {
    throw Error("SAE feature " + std::to_string(feature) + " is out of range; valid features are 0.." +
                std::to_string(config_.d_sae - 1));
  }
}

void Sae::Prepare(const float* x, int n, float* in, float* scale) const {
  const int C = config_.d_in;
  for (int t = 0; t < n; ++t) {
    const float* row = x + int64_t(t) * C;
    double mean = 0;
    for (int i = 0; i < C; ++i) mean += row[i];
    mean /= C;
    double s = 1;
    if (config_.normalize == SaeNormalize::kLayerNorm) {
      double var = 0;
      for (int i = 0; i < C; ++i) var += (row[i] - mean) * (row[i] - mean);
      s = std::sqrt(var / std::max(C - 1, 1)) + 1e-5;
    }
    scale[t] = static_cast<float>(s);
    float* out = in + int64_t(t) * C;
    for (int i = 0; i < C; ++i) {
      const double v = (row[i] - mean) / s - (config_.apply_b_dec_to_input ? b_dec_[i] : 0.0f);
      out[i] = static_cast<float>(v);
    }
  }
}

const float* Sae::Prepare(const float* x, int n, float* scale, SaeScratch& scratch) const {
  scratch.in.resize(size_t(n) * config_.d_in);
  if (scale == nullptr) {
    scratch.scales.resize(n);
    scale = scratch.scales.data();
  }
  Prepare(x, n, scratch.in.data(), scale);
  return scratch.in.data();
}

void Sae::Encode(const float* x, int n, float* features, float* scale, SaeScratch& scratch) const {
  const int S = config_.d_sae;
  MatMul(Prepare(x, n, scale, scratch), n, w_enc_, b_enc_, features, 0, S);
  std::vector<int>& order = scratch.order;
  std::vector<float>& keep = scratch.kept;
  for (int t = 0; t < n; ++t) {
    float* f = features + int64_t(t) * S;
    switch (config_.architecture) {
      case SaeArchitecture::kStandard:
      case SaeArchitecture::kJumpRelu:
        for (int i = 0; i < S; ++i) f[i] = Activate(f[i], i);
        break;
      case SaeArchitecture::kTopK: {
        const int k = config_.k;
        LargestIndices(f, S, k, &order);
        keep.resize(k);
        for (int j = 0; j < k; ++j) keep[j] = std::max(f[order[j]], 0.0f);
        std::fill(f, f + S, 0.0f);
        for (int j = 0; j < k; ++j) f[order[j]] = keep[j];
        break;
      }
    }
  }
}

void Sae::EncodeFeatures(const float* x, int n, const int* features, int count, float* acts, float* scale,
                         SaeScratch& scratch) const {
  const int C = config_.d_in, S = config_.d_sae;
  std::vector<float>& all = scratch.products;
  if (config_.architecture == SaeArchitecture::kTopK) {
    all.resize(size_t(n) * S);
    Encode(x, n, all.data(), scale, scratch);
    for (int t = 0; t < n; ++t) {
      for (int j = 0; j < count; ++j) acts[int64_t(t) * count + j] = all[int64_t(t) * S + features[j]];
    }
    return;
  }
  const float* in = Prepare(x, n, scale, scratch);
  all.resize(size_t(n) * kMatMulRowGrain);
  float* group = all.data();
  const size_t row_bytes = RowBytes(w_enc_.type, C);
  int have = -1;  // the first row of the group in `group`
  for (int j = 0; j < count; ++j) {
    const int f = features[j];
    const int first = f / kMatMulRowGrain * kMatMulRowGrain;
    const int rows = std::min<int>(kMatMulRowGrain, S - first);
    if (first != have) {
      const WeightView w{w_enc_.type, static_cast<const uint8_t*>(w_enc_.data) + row_bytes * first, rows, C};
      MatMul(in, n, w, b_enc_ + first, group, 0, rows);
      have = first;
    }
    for (int t = 0; t < n; ++t) acts[int64_t(t) * count + j] = Activate(group[int64_t(t) * rows + f - first], f);
  }
}

double Sae::Explained(const float* x, const float* features, float scale) const {
  const int C = config_.d_in, S = config_.d_sae;
  std::vector<double> x_hat(b_dec_, b_dec_ + C);
  for (int i = 0; i < S; ++i) {
    if (features[i] == 0) continue;
    const float* row = DecoderRow(i);
    for (int j = 0; j < C; ++j) x_hat[j] += double(features[i]) * row[j];
  }
  double mean = 0;
  for (int j = 0; j < C; ++j) mean += x[j];
  mean /= C;
  double err = 0, norm = 0;
  for (int j = 0; j < C; ++j) {
    const double xc = x[j] - mean;
    const double d = xc - x_hat[j] * scale;
    err += d * d;
    norm += xc * xc;
  }
  return norm > 0 ? 1 - err / norm : 0;
}

std::vector<float> Sae::LogitWeights(const Model& model, const std::vector<int>& features) const {
  for (int f : features) CheckFeature(f);
  const int C = config_.d_in;
  const int64_t F = static_cast<int64_t>(features.size());
  std::vector<float> v(F * C);
  for (int64_t i = 0; i < F; ++i) {
    const float* row = DecoderRow(features[i]);
    for (int j = 0; j < C; ++j) v[i * C + j] = row[j] * model.ln_f_g[j];
  }
  std::vector<float> logits(F * model.config().n_vocab);
  if (F > 0) MatMul(v.data(), F, model.output, nullptr, logits.data(), 0, model.output.rows);
  return logits;
}

StreamEdit Sae::Edit(std::shared_ptr<const Sae> sae, const std::vector<std::pair<int, float>>& steer,
                     const std::vector<std::pair<int, float>>& clamp) {
  for (const auto& s : steer) sae->CheckFeature(s.first);
  for (const auto& c : clamp) sae->CheckFeature(c.first);
  StreamEdit e;
  e.layer = sae->config().layer;
  e.point = sae->config().point;
  // The scratch is the edit's own: a forward pass calls it from one thread at a time.
  struct Scratch {
    std::vector<float> scale, acts;  // [rows], [rows, clamped features]
    SaeScratch sae;
  };
  auto scratch = std::make_shared<Scratch>();
  std::vector<int> features;
  for (const auto& c : clamp) features.push_back(c.first);
  e.edit = [sae, steer, clamp, features, scratch](int pos0, int rows, float* x) {
    const int C = sae->config().d_in;
    const int K = static_cast<int>(clamp.size());
    scratch->scale.resize(rows);
    scratch->acts.resize(size_t(rows) * K);
    float* scale = scratch->scale.data();
    float* f = scratch->acts.data();
    if (!steer.empty()) {
      sae->Prepare(x, rows, scale, scratch->sae);  // for the scale alone
      for (int t = 0; t < rows; ++t) {
        for (const auto& s : steer) {
          const float* d = sae->DecoderRow(s.first);
          const float a = s.second * scale[t];
          for (int j = 0; j < C; ++j) x[int64_t(t) * C + j] += a * d[j];
        }
      }
    }
    if (K > 0) {
      sae->EncodeFeatures(x, rows, features.data(), K, f, scale, scratch->sae);
      for (int t = 0; t < rows; ++t) {
        for (int j = 0; j < K; ++j) {
          const float* d = sae->DecoderRow(clamp[j].first);
          const float a = (clamp[j].second - f[int64_t(t) * K + j]) * scale[t];
          for (int i = 0; i < C; ++i) x[int64_t(t) * C + i] += a * d[i];
        }
      }
    }
  };
  return e;
}

std::shared_ptr<const Sae> LoadSaeFile(const std::string& path, int d_model) {
  std::shared_ptr<MappedFile> mapping = MappedFile::Open(path);
  std::unique_ptr<GgufFile> parsed = GgufFile::Parse(mapping->data(), mapping->size());
  // The parsed file points into the mapping: it keeps the mapping alive.
  std::shared_ptr<const GgufFile> file(parsed.release(), [mapping](const GgufFile* f) { delete f; });
  return std::make_shared<const Sae>(std::move(file), d_model);
}

}  // namespace gpt2
