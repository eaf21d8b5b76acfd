#include "model/capture.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "base/error.h"
#include "kernels/kernels.h"

namespace gpt2 {

double LogProbability(const float* logits, int64_t n, int id) {
  float max_logit = logits[0];
  for (int64_t i = 1; i < n; ++i) max_logit = std::max(max_logit, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - max_logit));
  return static_cast<double>(logits[id] - max_logit) - std::log(sum);
}

void TopProbabilities(const float* logits, int64_t n, int k, int* ids, float* probs) {
  if (k <= 0) return;
  float max_logit = logits[0];
  for (int64_t i = 1; i < n; ++i) max_logit = std::max(max_logit, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - max_logit));
  // Partial selection by insertion: k is small (5-10), n is 50k; ties go to the lower id.
  std::vector<std::pair<float, int>> best;  // (logit, id), sorted descending
  best.reserve(k + 1);
  auto before = [](const std::pair<float, int>& a, const std::pair<float, int>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  // Insertion costs O(n k): for a large k (the page asks for the whole distribution) sort instead.
  if (k > 64) {
    best.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) best[i] = {logits[i], static_cast<int>(i)};
    const size_t keep = std::min(static_cast<size_t>(k), best.size());
    std::partial_sort(best.begin(), best.begin() + keep, best.end(), before);
    best.resize(keep);
  }
  for (int64_t i = 0; i < n && k <= 64; ++i) {
    const float x = logits[i];
    if (static_cast<int>(best.size()) == k && x <= best.back().first) continue;
    const std::pair<float, int> e(x, static_cast<int>(i));
    best.insert(std::upper_bound(best.begin(), best.end(), e, before), e);
    if (static_cast<int>(best.size()) > k) best.pop_back();
  }
  for (int j = 0; j < k; ++j) {
    const bool have = j < static_cast<int>(best.size());
    ids[j] = have ? best[j].second : -1;
    probs[j] =
        have ? static_cast<float>(std::exp(static_cast<double>(best[j].first - max_logit)) / sum)
             : 0.0f;
  }
}

void Recorder::Record(const Activation& a) {
  RecordedTensor t;
  t.name = a.name;
  t.layer = a.layer;
  t.pos0 = a.pos0;
  int64_t n = 1;
  for (int i = 0; i < a.n_dims; ++i) {
    t.shape.push_back(a.shape[i]);
    n *= a.shape[i];
  }
  t.data.assign(a.data, a.data + n);
  tensors_.push_back(std::move(t));
}

const RecordedTensor* Recorder::Find(const std::string& name, int layer) const {
  for (const RecordedTensor& t : tensors_) {
    if (t.name == name && t.layer == layer) return &t;
  }
  return nullptr;
}

namespace {

// v resized to n elements of which at most `full` (the full context's size) will ever be kept.
// Steps add one position at a time: growing the capacity geometrically keeps that amortised,
// and the cap stops std::vector's doubling from reserving up to twice the full context (for
// GPT-2 small's MLP activations that would be 150 MB never used).
template <typename T>
void Grow(std::vector<T>& v, size_t n, size_t full) {
  if (n > v.capacity()) v.reserve(std::min(std::max(n, 2 * v.capacity()), std::max(n, full)));
  v.resize(n);
}

// Mean and standard deviation (biased, as torch.nn.LayerNorm normalises with; without eps).
void RowStats(const float* x, int C, float* out) {
  double mean = 0;
  for (int i = 0; i < C; ++i) mean += x[i];
  mean /= C;
  double var = 0;
  for (int i = 0; i < C; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= C;
  out[0] = static_cast<float>(mean);
  out[1] = static_cast<float>(std::sqrt(var));
}

}  // namespace

void CaptureStore::Init(const Model& model) {
  model_ = &model;
  kept_.clear();
  const Config& c = model.config();
  n_layer_ = c.n_layer;
  n_head_ = c.n_head;
  n_embd_ = c.n_embd;
  n_ff_ = c.n_ff;
  n_ctx_ = c.n_ctx;
  Clear();
}

void CaptureStore::Clear() {
  n_positions_ = pending_end_ = 0;
  q_.assign(n_layer_, {});
  keys_ = model_ != nullptr ? KvCache(model_->config(), 0, KvCache::Parts::kKeys) : KvCache();
  resid_.assign(n_layer_ + 1, {});
  resid_attn_stats_.assign(n_layer_, {});
  mlp_act_.assign(n_layer_, {});
  sublayer_norms_.assign(n_layer_, {});
  head_sum_.assign(static_cast<size_t>(n_layer_) * n_embd_, 0.0);
  top_ids_.clear();
  top_probs_.clear();
  top_done_.clear();
  for (KeptStream& k : kept_) {
    k.rows.clear();
    k.filled = 0;
  }
}

void CaptureStore::KeepStream(const std::string& name, int layer) {
  for (const KeptStream& k : kept_) {
    if (k.name == name && k.layer == layer) return;
  }
  kept_.push_back({name, layer, {}, 0});
}

const std::vector<float>* CaptureStore::Stream(const std::string& name, int layer) const {
  for (const KeptStream& k : kept_) {
    if (k.name == name && k.layer == layer) {
      return n_positions_ > 0 && k.filled >= n_positions_ ? &k.rows : nullptr;
    }
  }
  return nullptr;
}

void CaptureStore::Resize(int end) {
  const size_t P = static_cast<size_t>(end), full = static_cast<size_t>(n_ctx_);
  const size_t C = static_cast<size_t>(n_embd_), F = static_cast<size_t>(n_ff_);
  // The keys grow as Grow grows a vector (the cache moves when it does).
  if (end > keys_.capacity()) {
    keys_.Grow(std::min<int64_t>(std::max<int64_t>(end, 2 * keys_.capacity()), n_ctx_));
  }
  for (int l = 0; l < n_layer_; ++l) {
    Grow(q_[l], P * C, full * C);
    Grow(resid_attn_stats_[l], P * 2, full * 2);
    Grow(mlp_act_[l], P * F, full * F);
    Grow(sublayer_norms_[l], P * 4, full * 4);
  }
  for (auto& r : resid_) Grow(r, P * C, full * C);
  Grow(top_ids_, P * kTopProbs, full * kTopProbs);
  Grow(top_probs_, P * kTopProbs, full * kTopProbs);
  Grow(top_done_, P, full);
}

void CaptureStore::Begin(int pos0, int n) {
  if (pos0 != n_positions_)
    throw Error("capture must continue at position " + std::to_string(n_positions_));
  pending_T_ = n;
  pending_end_ = pos0 + n;
  pending_head_sum_ = head_sum_;
  Resize(pending_end_);
}

void CaptureStore::BeginRerun(int first_block) {
  pending_T_ = n_positions_;
  pending_end_ = n_positions_;
  pending_head_sum_ = head_sum_;
  for (int l = std::max(first_block, 0); l < n_layer_; ++l) {
    std::fill_n(pending_head_sum_.begin() + static_cast<size_t>(l) * n_embd_, n_embd_, 0.0);
  }
  if (first_block < n_layer_) std::fill(top_done_.begin(), top_done_.end(), 0);
}

void CaptureStore::Commit() {
  n_positions_ = pending_end_;
  head_sum_ = pending_head_sum_;
}

void CaptureStore::Abort() {
  pending_end_ = n_positions_;
  for (KeptStream& k : kept_) k.filled = std::min(k.filled, n_positions_);
  Resize(n_positions_);
}

void CaptureStore::CopyRows(std::vector<float>& dst, const Activation& a, int width) {
  const int64_t rows = a.shape[0];
  std::memcpy(dst.data() + static_cast<size_t>(a.pos0) * width, a.data,
              sizeof(float) * rows * width);
}

// [H, T, D] as reported for q into rows [pos0, pos0 + T) of dst [P, C].
void CaptureStore::CopyHeads(std::vector<float>& dst, const Activation& a) {
  const int64_t H = a.shape[0], n = a.shape[1], D = a.shape[2];
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t t = 0; t < n; ++t) {
      std::copy_n(a.data + (h * n + t) * D, D, dst.data() + (a.pos0 + t) * n_embd_ + h * D);
    }
  }
}

void CaptureStore::Observe(const Activation& a) {
  const std::string name = a.name;
  for (KeptStream& k : kept_) {
    // Rows are kept only contiguously from position 0, as the rest of the store.
    if (k.layer != a.layer || k.name != name || a.pos0 > k.filled) continue;
    const int end = a.pos0 + static_cast<int>(a.shape[0]);
    Grow(k.rows, std::max<size_t>(k.rows.size(), size_t(end) * n_embd_), size_t(n_ctx_) * n_embd_);
    CopyRows(k.rows, a, n_embd_);
    k.filled = std::max(k.filled, end);
  }
  // The four sublayer tensors whose row norms the store keeps, in its column order.
  static const Hook kSublayerTensors[4] = {Hook::kLn1, Hook::kAttnOut, Hook::kLn2, Hook::kMlpOut};
  for (int k = 0; k < 4; ++k) {
    if (a.hook != kSublayerTensors[k]) continue;
    for (int64_t t = 0; t < a.shape[0]; ++t) {
      double s = 0;
      for (int i = 0; i < n_embd_; ++i)
        s += static_cast<double>(a.data[t * n_embd_ + i]) * a.data[t * n_embd_ + i];
      sublayer_norms_[a.layer][(static_cast<size_t>(a.pos0) + t) * 4 + k] =
          static_cast<float>(std::sqrt(s));
    }
    return;
  }
  switch (a.hook) {
    case Hook::kEmbed:
      CopyRows(resid_[0], a, n_embd_);
      break;
    case Hook::kResidPost:
      CopyRows(resid_[a.layer + 1], a, n_embd_);
      break;
    case Hook::kResidMid:
      for (int64_t t = 0; t < a.shape[0]; ++t) {
        RowStats(a.data + t * n_embd_, n_embd_,
                 resid_attn_stats_[a.layer].data() + (a.pos0 + t) * 2);
      }
      break;
    case Hook::kMlpAct:
      CopyRows(mlp_act_[a.layer], a, n_ff_);
      break;
    case Hook::kAttnHeads: {
      double* sum = pending_head_sum_.data() + static_cast<size_t>(a.layer) * n_embd_;
      for (int64_t t = 0; t < a.shape[0]; ++t) {
        for (int i = 0; i < n_embd_; ++i) sum[i] += a.data[t * n_embd_ + i];
      }
      break;
    }
    case Hook::kQ:
      CopyHeads(q_[a.layer], a);
      break;
    case Hook::kK: {
      const int64_t n = a.shape[1], D = a.shape[2];
      for (int64_t h = 0; h < a.shape[0]; ++h) {
        keys_.Store(a.layer, h, a.pos0, n, a.data + h * n * D, nullptr, D);
      }
      break;
    }
    default:
      break;
  }
}

void CaptureStore::CheckPosition(int layer, int p) const {
  if (layer < 0 || layer >= n_layer_) {
    throw Error("layer " + std::to_string(layer) + " is out of range; valid layers are 0.." +
                std::to_string(n_layer_ - 1));
  }
  if (p < 0 || p >= n_positions_) {
    throw Error("No activations were captured for position " + std::to_string(p) +
                " (turn on capture and generate again).");
  }
}

const float* CaptureStore::AttentionRows(int layer, int h0, int h1, int p) const {
  CheckPosition(layer, p);
  const int64_t C = n_embd_, D = n_embd_ / n_head_, keys = p + 1;
  attn_row_.resize(static_cast<size_t>(h1 - h0) * keys);
  // Session::AttentionStep's call (KvCache::Attend) with the same query and keys, so the same
  // probabilities; no value sum.
  for (int64_t h = h0; h < h1; ++h) {
    HeadQueries io;
    io.q = q_[layer].data() + static_cast<size_t>(p) * C + h * D;
    io.probs = attn_row_.data() + (h - h0) * keys;
    keys_.Attend(layer, h, p, 1, io);
  }
  return attn_row_.data();
}

const float* CaptureStore::Attention(int layer, int p) const {
  return AttentionRows(layer, 0, n_head_, p);
}

const float* CaptureStore::HeadAttention(int layer, int head, int p) const {
  if (head < 0 || head >= n_head_) {
    throw Error("head " + std::to_string(head) + " is out of range; valid heads are 0.." +
                std::to_string(n_head_ - 1));
  }
  return AttentionRows(layer, head, head + 1, p);
}

const float* CaptureStore::MlpActivations(int layer, int p) const {
  CheckPosition(layer, p);
  return mlp_act_[layer].data() + static_cast<size_t>(p) * n_ff_;
}

const std::vector<float>& CaptureStore::Residual(int index) const {
  if (index < 0 || index > n_layer_) {
    throw Error("residual index " + std::to_string(index) +
                " is out of range; valid indices are 0.." + std::to_string(n_layer_));
  }
  return resid_[index];
}

void CaptureStore::EnsureTop(int p) const {
  CheckPosition(0, p);
  if (top_done_[p]) return;
  const size_t C = static_cast<size_t>(n_embd_);
  const std::vector<float>& final_stream = resid_[n_layer_];
  const std::vector<std::vector<float>> row{
      std::vector<float>(final_stream.begin() + p * C, final_stream.begin() + (p + 1) * C)};
  const LensEntry e = LogitLens(*model_, row, 1, p, kTopProbs)[0];
  std::copy(e.top_ids.begin(), e.top_ids.end(),
            top_ids_.begin() + static_cast<size_t>(p) * kTopProbs);
  std::copy(e.top_probs.begin(), e.top_probs.end(),
            top_probs_.begin() + static_cast<size_t>(p) * kTopProbs);
  top_done_[p] = 1;
}

const int* CaptureStore::TopIds(int p) const {
  EnsureTop(p);
  return top_ids_.data() + static_cast<size_t>(p) * kTopProbs;
}

const float* CaptureStore::TopProbs(int p) const {
  EnsureTop(p);
  return top_probs_.data() + static_cast<size_t>(p) * kTopProbs;
}

std::vector<float> CaptureStore::ResidualNorms() const {
  const int P = n_positions_, C = n_embd_;
  std::vector<float> out(static_cast<size_t>(n_layer_ + 1) * P);
  for (int r = 0; r <= n_layer_; ++r) {
    for (int p = 0; p < P; ++p) {
      const float* x = resid_[r].data() + static_cast<size_t>(p) * C;
      double s = 0;
      for (int i = 0; i < C; ++i) s += static_cast<double>(x[i]) * x[i];
      out[static_cast<size_t>(r) * P + p] = static_cast<float>(std::sqrt(s));
    }
  }
  return out;
}

std::vector<float> CaptureStore::SublayerNorms() const {
  const size_t per_layer = static_cast<size_t>(n_positions_) * 4;
  std::vector<float> out(static_cast<size_t>(n_layer_) * per_layer);
  for (int l = 0; l < n_layer_; ++l)
    std::copy_n(sublayer_norms_[l].begin(), per_layer, out.begin() + l * per_layer);
  return out;
}

std::vector<float> CaptureStore::LayerNormStats() const {
  const int P = n_positions_, C = n_embd_, L = n_layer_;
  std::vector<float> out(static_cast<size_t>(2 * L + 1) * P * 2);
  for (int r = 0; r < 2 * L + 1; ++r) {
    float* o = out.data() + static_cast<size_t>(r) * P * 2;
    if (r % 2 == 1) {  // ln_2 of block r / 2: kept as statistics
      std::copy_n(resid_attn_stats_[r / 2].begin(), static_cast<size_t>(P) * 2, o);
      continue;
    }
    const std::vector<float>& src = r == 2 * L ? resid_[L] : resid_[r / 2];
    for (int p = 0; p < P; ++p) RowStats(src.data() + static_cast<size_t>(p) * C, C, o + p * 2);
  }
  return out;
}

void CaptureStore::LogitLensWindow(const Model& model, int begin, int end, int layer_begin,
                                   int layer_end, int top_k, std::vector<int>* ids,
                                   std::vector<float>* probs) const {
  if (begin < 0 || end > n_positions_ || begin >= end || top_k < 1) {
    throw Error("logit lens window [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") is out of range; captured positions are 0.." + std::to_string(n_positions_ - 1));
  }
  if (layer_begin < 0 || layer_end > n_layer_ || layer_begin >= layer_end) {
    throw Error("logit lens blocks [" + std::to_string(layer_begin) + ", " +
                std::to_string(layer_end) + ") are out of range; blocks are 0.." +
                std::to_string(n_layer_ - 1));
  }
  const int L = layer_end - layer_begin, C = n_embd_, T = end - begin;
  std::vector<std::vector<float>> residuals(L);
  for (int l = 0; l < L; ++l) {
    residuals[l].assign(resid_[layer_begin + l + 1].begin() + static_cast<size_t>(begin) * C,
                        resid_[layer_begin + l + 1].begin() + static_cast<size_t>(end) * C);
  }
  const std::vector<LensEntry> lens = LogitLens(model, residuals, T, begin, top_k);
  ids->assign(static_cast<size_t>(L) * T * top_k, -1);
  probs->assign(ids->size(), 0.0f);
  for (const LensEntry& e : lens) {
    const size_t base = (static_cast<size_t>(e.layer) * T + (e.position - begin)) * top_k;
    for (int k = 0; k < top_k && k < static_cast<int>(e.top_ids.size()); ++k) {
      (*ids)[base + k] = e.top_ids[k];
      (*probs)[base + k] = e.top_probs[k];
    }
  }
}

std::vector<float> CaptureStore::HeadMeans() const {
  if (n_positions_ == 0) throw Error("mean ablation needs a captured run to take the means from");
  std::vector<float> means(head_sum_.size());
  for (size_t i = 0; i < means.size(); ++i)
    means[i] = static_cast<float>(head_sum_[i] / n_positions_);
  return means;
}

}  // namespace gpt2
