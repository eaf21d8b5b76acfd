#include "sae/sae.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "base/error.h"
#include "format/quant.h"
#include "model/matmul_on.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "model/top_k.h"

namespace gpt2 {

namespace {

const GgufTensor& Bind(const GgufFile& f, const std::string& name, int64_t ne0, int64_t ne1,
                       bool f32) {
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

Sae::Sae(std::shared_ptr<const GgufFile> file, int d_model, const std::string& prefix)
    : file_(std::move(file)) {
  config_ = SaeConfigFromGguf(*file_, prefix);
  const SaeConfig& c = config_;
  if (c.d_in != d_model) {
    throw Error("the SAE reads vectors of " + std::to_string(c.d_in) +
                " numbers (d_in) but the model's stream has " + std::to_string(d_model) +
                "; it was trained on another model");
  }
  const std::string p = prefix + ".";
  const GgufTensor& enc = Bind(*file_, p + "W_enc", c.d_in, c.d_sae, false);
  w_enc_ = WeightView{enc.type, enc.data, c.d_sae, c.d_in};
  b_enc_ = reinterpret_cast<const float*>(Bind(*file_, p + "b_enc", c.d_sae, 0, true).data);
  // A transcoder's decoder is stored as the set was converted (12 of GPT-2 small's in f32 would
  // be 906 MB, convert/sae_convert.h); an SAE's stays f32, which steering and clamping read.
  const GgufTensor& dec = Bind(*file_, p + "W_dec", c.d_in, c.d_sae, !c.transcoder);
  w_dec_view_ = WeightView{dec.type, dec.data, c.d_sae, c.d_in};
  if (dec.type == TensorType::kF32) w_dec_ = reinterpret_cast<const float*>(dec.data);
  b_dec_ = reinterpret_cast<const float*>(Bind(*file_, p + "b_dec", c.d_in, 0, true).data);
  if (c.architecture == SaeArchitecture::kJumpRelu) {
    threshold_ =
        reinterpret_cast<const float*>(Bind(*file_, p + "threshold", c.d_sae, 0, true).data);
  }
  const size_t expected = c.architecture == SaeArchitecture::kJumpRelu ? 5 : 4;
  if (prefix == "sae" && file_->tensors().size() != expected) {
    throw Error("SAE GGUF has tensors its architecture does not use");
  }
}

void Sae::DecoderRowInto(int feature, float* out) const {
  CheckFeature(feature);
  const size_t row_bytes = RowBytes(w_dec_view_.type, config_.d_in);
  DequantizeRow(w_dec_view_.type,
                static_cast<const uint8_t*>(w_dec_view_.data) + row_bytes * feature, out,
                config_.d_in);
}

void Sae::EncoderRowInto(int feature, float* out) const {
  CheckFeature(feature);
  const size_t row_bytes = RowBytes(w_enc_.type, config_.d_in);
  DequantizeRow(w_enc_.type, static_cast<const uint8_t*>(w_enc_.data) + row_bytes * feature, out,
                config_.d_in);
}

void Sae::CheckFeature(int feature) const {
  if (feature < 0 || feature >= config_.d_sae) {
    throw Error("SAE feature " + std::to_string(feature) +
                " is out of range; valid features are 0.." + std::to_string(config_.d_sae - 1));
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
    if (config_.normalize != SaeNormalize::kNone) {
      double var = 0;
      for (int i = 0; i < C; ++i) var += (row[i] - mean) * (row[i] - mean);
      s = config_.normalize == SaeNormalize::kLayerNorm ? std::sqrt(var / std::max(C - 1, 1)) + 1e-5
                                                        : std::sqrt(var / C + kTranscoderLnEps);
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

void Sae::Encode(const float* x, int n, float* features, float* scale, SaeScratch& scratch,
                 ThreadPool* pool) const {
  const int S = config_.d_sae;
  const float* in = Prepare(x, n, scale, scratch);
  if (pool != nullptr) {
    MatMulInput prepared;  // a call's own: the callers with a pool encode many rows at once
    MatMulOn(*pool, prepared, in, n, w_enc_, b_enc_, features, QuantActivations::kInt8);
  } else {
    MatMul(in, n, w_enc_, b_enc_, features, 0, S);
  }
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

void Sae::EncodeFeatures(const float* x, int n, const int* features, int count, float* acts,
                         float* scale, SaeScratch& scratch) const {
  const int C = config_.d_in, S = config_.d_sae;
  std::vector<float>& all = scratch.products;
  if (config_.architecture == SaeArchitecture::kTopK) {
    all.resize(size_t(n) * S);
    Encode(x, n, all.data(), scale, scratch);
    for (int t = 0; t < n; ++t) {
      for (int j = 0; j < count; ++j)
        acts[int64_t(t) * count + j] = all[int64_t(t) * S + features[j]];
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
      const WeightView w{w_enc_.type, static_cast<const uint8_t*>(w_enc_.data) + row_bytes * first,
                         rows, C};
      MatMul(in, n, w, b_enc_ + first, group, 0, rows);
      have = first;
    }
    for (int t = 0; t < n; ++t)
      acts[int64_t(t) * count + j] = Activate(group[int64_t(t) * rows + f - first], f);
  }
}

Sae::Gathered Sae::Gather(const std::vector<int>& features) const {
  Gathered g;
  g.features = features;
  const size_t row_bytes = RowBytes(w_enc_.type, config_.d_in);
  g.rows.resize(row_bytes * features.size());
  for (size_t j = 0; j < features.size(); ++j) {
    CheckFeature(features[j]);
    std::memcpy(g.rows.data() + row_bytes * j,
                static_cast<const uint8_t*>(w_enc_.data) + row_bytes * features[j], row_bytes);
    g.bias.push_back(b_enc_[features[j]]);
  }
  return g;
}

void Sae::EncodeGathered(const Gathered& g, const float* x, int n, float* acts, float* scale,
                         SaeScratch& scratch) const {
  const int count = static_cast<int>(g.features.size());
  if (config_.architecture == SaeArchitecture::kTopK || count == 0) {
    EncodeFeatures(x, n, g.features.data(), count, acts, scale, scratch);
    return;
  }
  const WeightView w{w_enc_.type, g.rows.data(), count, config_.d_in};
  MatMul(Prepare(x, n, scale, scratch), n, w, g.bias.data(), acts, 0, count);
  for (int t = 0; t < n; ++t) {
    float* a = acts + int64_t(t) * count;
    for (int j = 0; j < count; ++j) a[j] = Activate(a[j], g.features[j]);
  }
}

void Sae::Decode(const float* features, const float* scale, int n, float* out) const {
  const int C = config_.d_in, S = config_.d_sae;
  std::vector<float> row(w_dec_ == nullptr ? C : 0);
  std::vector<double> sum(C);
  for (int t = 0; t < n; ++t) {
    const float* f = features + int64_t(t) * S;
    std::copy(b_dec_, b_dec_ + C, sum.begin());
    for (int i = 0; i < S; ++i) {
      if (f[i] == 0) continue;
      const float* d = DecoderRow(i);
      if (d == nullptr) {
        DecoderRowInto(i, row.data());
        d = row.data();
      }
      for (int j = 0; j < C; ++j) sum[j] += double(f[i]) * d[j];
    }
    const double s = config_.transcoder ? 1.0 : scale[t];
    float* o = out + int64_t(t) * C;
    for (int j = 0; j < C; ++j) o[j] = static_cast<float>(sum[j] * s);
  }
}

double Sae::Explained(const float* x, const float* features, float scale) const {
  if (config_.transcoder)
    throw Error("a transcoder reconstructs another tensor than it reads: no explained share");
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
  ThreadPool one(1);
  std::vector<float> logits;
  LogitWeights(model, features, 0, model.config().n_vocab, one, &logits);
  return logits;
}

void Sae::LogitWeights(const Model& model, const std::vector<int>& features, int v0, int v1,
                       ThreadPool& pool, std::vector<float>* logits) const {
  for (int f : features) CheckFeature(f);
  if (v0 < 0 || v1 < v0 || v1 > model.config().n_vocab) {
    throw Error("tokens [" + std::to_string(v0) + ", " + std::to_string(v1) +
                ") are not within the vocabulary of " + std::to_string(model.config().n_vocab));
  }
  const int C = config_.d_in;
  const int64_t F = static_cast<int64_t>(features.size());
  std::vector<float> v(F * C);
  for (int64_t i = 0; i < F; ++i) {
    float* row = v.data() + i * C;
    DecoderRowInto(features[i], row);
    for (int j = 0; j < C; ++j) row[j] *= model.ln_f_g[j];
  }
  logits->resize(F * (v1 - v0));
  const WeightView& w = model.output;
  const WeightView tokens{w.type,
                          static_cast<const uint8_t*>(w.data) +
                              int64_t(v0) * static_cast<int64_t>(RowBytes(w.type, w.cols)),
                          v1 - v0, w.cols};
  MatMulInput in;
  if (F > 0 && v1 > v0) {
    MatMulOn(pool, in, v.data(), F, tokens, nullptr, logits->data(), QuantActivations::kInt8);
  }
}

void Sae::Steer(const std::vector<std::pair<int, float>>& steer, int rows, float* x, float* scale,
                SaeScratch& scratch) const {
  const int C = config_.d_in;
  Prepare(x, rows, scale, scratch);  // for the scale alone
  for (int t = 0; t < rows; ++t) {
    for (const auto& s : steer) {
      const float* d = DecoderRow(s.first);
      const float a = s.second * scale[t];
      for (int j = 0; j < C; ++j) x[int64_t(t) * C + j] += a * d[j];
    }
  }
}

void Sae::Clamp(const std::vector<std::pair<int, float>>& clamp, const std::vector<int>& features,
                int rows, float* x, float* acts, float* scale, SaeScratch& scratch) const {
  const int C = config_.d_in;
  const int K = static_cast<int>(clamp.size());
  EncodeFeatures(x, rows, features.data(), K, acts, scale, scratch);
  for (int t = 0; t < rows; ++t) {
    for (int j = 0; j < K; ++j) {
      const float* d = DecoderRow(clamp[j].first);
      const float a = (clamp[j].second - acts[int64_t(t) * K + j]) * scale[t];
      for (int i = 0; i < C; ++i) x[int64_t(t) * C + i] += a * d[i];
    }
  }
}

// The gradient of s(x) (Prepare's scale) for a row x [C], into ds [C], and s itself: with
// xc = x - mean(x) and sd = sqrt(sum xc^2 / (C - 1)), ds/dx = xc / ((C - 1) sd) under layer_norm
// (the centring drops out: sum xc = 0); s = 1 and ds/dx = 0 otherwise.
double Sae::ScaleGradient(const float* x, double* xc, double* ds) const {
  const int C = config_.d_in;
  double mean = 0;
  for (int i = 0; i < C; ++i) mean += x[i];
  mean /= C;
  double var = 0;
  for (int i = 0; i < C; ++i) {
    xc[i] = x[i] - mean;
    var += xc[i] * xc[i];
  }
  if (config_.normalize != SaeNormalize::kLayerNorm) {
    std::fill(ds, ds + C, 0.0);
    return 1.0;
  }
  const double n = std::max(C - 1, 1);
  const double sd = std::sqrt(var / n);
  for (int i = 0; i < C; ++i) ds[i] = sd > 0 ? xc[i] / (n * sd) : 0.0;
  return sd + 1e-5;
}

// The vector-Jacobian product of Steer then Clamp (see Edit), row by row in double:
//   steering  x1 = x0 + s(x0) sum_i alpha_i d_i:
//             g0 = g1 + (sum_i alpha_i g1.d_i) ds(x0)
//   clamping  x2 = x1 + sum_j (v_j - f_j(x1)) s(x1) d_j, f_j = act(pre_j), pre_j = in(x1).w_j +
//   b_j,
//             in = xc / s - b_dec (apply_b_dec_to_input):
//             g1 = g2 + sum_j (g2.d_j) [(v_j - f_j) ds(x1) - s(x1) df_j/dx1],
//             df_j/dx1 = [f_j > 0] (wc_j / s - (xc.w_j / s^2) ds(x1)), wc_j = w_j - mean(w_j)
// (the activation's slope is 1 where the feature fires, for ReLU, JumpReLU and TopK alike:
// f = pre there). The encoder rows are dequantized, the straight-through gradient of its type.
void Sae::EditBackward(const std::vector<std::pair<int, float>>& steer,
                       const std::vector<std::pair<int, float>>& clamp,
                       const std::vector<int>& features, int rows, const float* x_in, float* g,
                       EditScratch& scratch) const {
  const int C = config_.d_in;
  const int K = static_cast<int>(clamp.size());
  scratch.x.assign(x_in, x_in + int64_t(rows) * C);
  scratch.scale.resize(rows);
  scratch.acts.resize(size_t(rows) * K);
  if (!steer.empty()) Steer(steer, rows, scratch.x.data(), scratch.scale.data(), scratch.sae);
  if (K > 0)
    EncodeFeatures(scratch.x.data(), rows, features.data(), K, scratch.acts.data(),
                   scratch.scale.data(), scratch.sae);
  std::vector<double> xc(C), ds(C), delta(C);
  // The clamped features' encoder rows, dequantized once, and each one's mean.
  std::vector<float> w(size_t(K) * C);
  std::vector<double> w_mean(K, 0.0);
  const size_t row_bytes = RowBytes(w_enc_.type, C);
  for (int j = 0; j < K; ++j) {
    float* wj = w.data() + size_t(j) * C;
    DequantizeRow(w_enc_.type,
                  static_cast<const uint8_t*>(w_enc_.data) + row_bytes * clamp[j].first, wj, C);
    for (int i = 0; i < C; ++i) w_mean[j] += wj[i];
    w_mean[j] /= C;
  }
  for (int t = 0; t < rows; ++t) {
    float* gt = g + int64_t(t) * C;
    if (K > 0) {
      const double s = ScaleGradient(scratch.x.data() + int64_t(t) * C, xc.data(), ds.data());
      std::fill(delta.begin(), delta.end(), 0.0);
      for (int j = 0; j < K; ++j) {
        const float* d = DecoderRow(clamp[j].first);
        double gd = 0;
        for (int i = 0; i < C; ++i) gd += double(gt[i]) * d[i];
        const double f = scratch.acts[int64_t(t) * K + j];
        const double on_scale = (clamp[j].second - f) * gd;
        for (int i = 0; i < C; ++i) delta[i] += on_scale * ds[i];
        if (!(f > 0)) continue;
        const float* wj = w.data() + size_t(j) * C;
        double xw = 0;
        for (int i = 0; i < C; ++i) xw += xc[i] * wj[i];
        for (int i = 0; i < C; ++i)
          delta[i] -= s * gd * ((wj[i] - w_mean[j]) / s - xw / (s * s) * ds[i]);
      }
      for (int i = 0; i < C; ++i) gt[i] = static_cast<float>(gt[i] + delta[i]);
    }
    if (!steer.empty() && config_.normalize == SaeNormalize::kLayerNorm) {
      ScaleGradient(x_in + int64_t(t) * C, xc.data(), ds.data());
      double along = 0;
      for (const auto& st : steer) {
        const float* d = DecoderRow(st.first);
        double gd = 0;
        for (int i = 0; i < C; ++i) gd += double(gt[i]) * d[i];
        along += st.second * gd;
      }
      for (int i = 0; i < C; ++i) gt[i] = static_cast<float>(gt[i] + along * ds[i]);
    }
  }
}

StreamEdit Sae::Edit(std::shared_ptr<const Sae> sae,
                     const std::vector<std::pair<int, float>>& steer,
                     const std::vector<std::pair<int, float>>& clamp) {
  if (sae->config().transcoder)
    throw Error("a transcoder's features are not steered or clamped as an SAE's");
  for (const auto& s : steer) sae->CheckFeature(s.first);
  for (const auto& c : clamp) sae->CheckFeature(c.first);
  StreamEdit e;
  e.layer = sae->config().layer;
  e.point = sae->config().point;
  e.name = "SAE";
  for (const auto& s : steer) e.name += " steering of feature " + std::to_string(s.first) + ",";
  for (const auto& c : clamp) e.name += " clamp of feature " + std::to_string(c.first) + ",";
  e.name.back() = ' ';
  e.name += "at " + sae->config().hook_name;
  // The scratch is the edit's own: a forward (or backward) pass calls it from one thread at a time.
  auto scratch = std::make_shared<EditScratch>();
  std::vector<int> features;
  for (const auto& c : clamp) features.push_back(c.first);
  e.edit = [sae, steer, clamp, features, scratch](int, int rows, float* x) {
    scratch->scale.resize(rows);
    scratch->acts.resize(size_t(rows) * clamp.size());
    if (!steer.empty()) sae->Steer(steer, rows, x, scratch->scale.data(), scratch->sae);
    if (!clamp.empty())
      sae->Clamp(clamp, features, rows, x, scratch->acts.data(), scratch->scale.data(),
                 scratch->sae);
  };
  e.backward = [sae, steer, clamp, features, scratch](int, int rows, const float* x_in, float* g) {
    sae->EditBackward(steer, clamp, features, rows, x_in, g, *scratch);
  };
  return e;
}

StreamEdit Sae::Splice(std::shared_ptr<const Sae> sae, int first_position) {
  if (sae->config().transcoder)
    throw Error("a transcoder stands in for another tensor than it reads: splice it by block");
  StreamEdit e;
  e.layer = sae->config().layer;
  e.point = sae->config().point;
  e.name = "SAE spliced in at " + sae->config().hook_name;
  struct Scratch {
    std::vector<float> features, scale, x_hat;
    SaeScratch sae;
  };
  auto scratch = std::make_shared<Scratch>();
  e.edit = [sae, first_position, scratch](int pos0, int rows, float* x) {
    const int skip = std::min(rows, std::max(0, first_position - pos0));
    const int n = rows - skip, C = sae->config().d_in;
    if (n == 0) return;
    float* in = x + int64_t(skip) * C;
    scratch->features.resize(size_t(n) * sae->d_sae());
    scratch->scale.resize(n);
    scratch->x_hat.resize(size_t(n) * C);
    sae->Encode(in, n, scratch->features.data(), scratch->scale.data(), scratch->sae);
    sae->Decode(scratch->features.data(), scratch->scale.data(), n, scratch->x_hat.data());
    for (int t = 0; t < n; ++t) {
      float* row = in + int64_t(t) * C;
      double mean = 0;
      for (int i = 0; i < C; ++i) mean += row[i];
      mean /= C;
      const float* r = scratch->x_hat.data() + int64_t(t) * C;
      for (int i = 0; i < C; ++i) row[i] = static_cast<float>(r[i] + mean);
    }
  };
  return e;
}

std::shared_ptr<const Sae> LoadSaeFile(const std::string& path, int d_model) {
  std::shared_ptr<MappedFile> mapping = MappedFile::Open(path);
  std::unique_ptr<GgufFile> parsed = GgufFile::Parse(mapping->data(), mapping->size());
  // The parsed file points into the mapping: it keeps the mapping alive.
  std::shared_ptr<const GgufFile> file(parsed.release(),
                                       [mapping](const GgufFile* f) { delete f; });
  return std::make_shared<const Sae>(std::move(file), d_model);
}

}  // namespace gpt2
