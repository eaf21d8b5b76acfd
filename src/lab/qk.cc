#include "lab/qk.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "format/quant.h"
#include "format/tensor_type.h"

namespace gpt2 {
namespace {

void CheckSpec(const Config& c, int T, const ScoreSpec& spec, int k) {
  const auto range = [](const std::string& what, int v, int hi) {
    return what + " " + std::to_string(v) + " is out of range; valid " + what + "s are 0.." + std::to_string(hi);
  };
  if (spec.layer < 0 || spec.layer >= c.n_layer) throw Error(range("block", spec.layer, c.n_layer - 1));
  if (spec.head < 0 || spec.head >= c.n_head) throw Error(range("head", spec.head, c.n_head - 1));
  if (spec.query < 0 || spec.query >= T) throw Error(range("position", spec.query, T - 1));
  if (spec.key < 0 || spec.key > spec.query) {
    throw Error("key position " + std::to_string(spec.key) + " is out of range; the query at " +
                std::to_string(spec.query) + " sees positions 0.." + std::to_string(spec.query));
  }
  if (k < 1) throw Error("k must be >= 1.");
}

double Dot(const float* a, const float* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += double(a[i]) * b[i];
  return s;
}

// One head's rows of W_Q or W_K (part 0 or 1 of qkv) in f32, [D, C], and their biases [D].
struct HeadWeights {
  std::vector<float> w, b;
};
HeadWeights HeadRows(const BlockWeights& bw, int part, int head, int C, int D) {
  HeadWeights out;
  out.w.resize(int64_t(D) * C);
  const size_t row_bytes = RowBytes(bw.qkv.type, C);
  for (int d = 0; d < D; ++d) {
    const int64_t r = int64_t(part) * C + int64_t(head) * D + d;
    DequantizeRow(bw.qkv.type, static_cast<const uint8_t*>(bw.qkv.data) + r * row_bytes, out.w.data() + int64_t(d) * C, C);
  }
  out.b.assign(bw.qkv_b + part * C + head * D, bw.qkv_b + part * C + (head + 1) * D);
  return out;
}

// What the real run leaves: per block below L the attention and MLP outputs and the stream after
// attention [T, C], the embedding, the stream entering L, and L's score and probability.
struct Captured {
  std::vector<std::vector<float>> attn_out, mlp_out, resid_mid;
  std::vector<float> embed, resid_pre;
  double score = 0, probability = 0;
};

// One side at position p: its head rows, ln_1 frozen at x_p's 1/sigma, and its parts' shares.
// A feature's vector is not kept (random transcoders fire thousands of features per position):
// Vector() rebuilds it from its activation and decoder row.
class Side {
 public:
  Side(const Captured& cap, const BlockWeights& bw, HeadWeights rows, int p, int C, double eps)
      : cap_(cap), bw_(bw), rows_(std::move(rows)), p_(p), C_(C) {
    const int D = static_cast<int>(rows_.b.size());
    const float* x = cap.resid_pre.data() + int64_t(p) * C;
    double mean = 0, var = 0;
    for (int i = 0; i < C; ++i) mean += x[i];
    mean /= C;
    for (int i = 0; i < C; ++i) var += (x[i] - mean) * (x[i] - mean);
    inv_ = 1.0 / std::sqrt(var / C + eps);
    bias_ = rows_.b;
    for (int d = 0; d < D; ++d) bias_[d] += static_cast<float>(Dot(bw.ln1_b, rows_.w.data() + int64_t(d) * C, C));
    projected_ = Project(std::vector<float>(x, x + C));
    for (int d = 0; d < D; ++d) projected_[d] += bias_[d];
  }
  // The side's q (or k) of the head [D]: every part and the bias.
  const std::vector<float>& projected() const { return projected_; }

  // Every part's share with the other side held at `other`, in parts() order, the bias's last.
  // Each part costs one dot product with grad = scale (W^T other) through the frozen LayerNorm.
  void Attribute(const TranscoderSet& tcs, int L, const std::vector<float>& other, double scale) {
    const int C = C_, D = static_cast<int>(other.size());
    std::vector<double> u(C, 0.0);
    for (int d = 0; d < D; ++d) {
      const float* w = rows_.w.data() + int64_t(d) * C;
      for (int i = 0; i < C; ++i) u[i] += double(w[i]) * other[d];
    }
    double mean = 0;
    for (int i = 0; i < C; ++i) mean += u[i] * bw_.ln1_g[i];
    mean /= C;
    std::vector<float> grad(C);
    for (int i = 0; i < C; ++i) grad[i] = static_cast<float>(scale * inv_ * (u[i] * bw_.ln1_g[i] - mean));
    const auto add = [&](QkPart part, std::vector<float> v) {
      part.score = Dot(v.data(), grad.data(), C);
      parts_.push_back(part);
      kept_.push_back(part.kind == QkPartKind::kFeature ? std::vector<float>() : std::move(v));
    };
    add({QkPartKind::kEmbedding}, Row(cap_.embed));
    SaeScratch scratch;
    std::vector<float> acts, dec(C);
    for (int l = 0; l < L; ++l) {
      add({QkPartKind::kAttention, l}, Row(cap_.attn_out[l]));
      std::vector<float> error = Row(cap_.mlp_out[l]);
      if (const Sae* tc = tcs.block(l)) {
        acts.resize(tc->d_sae());
        tc->Encode(cap_.resid_mid[l].data() + int64_t(p_) * C, 1, acts.data(), nullptr, scratch);
        for (int f = 0; f < tc->d_sae(); ++f) {
          if (!(acts[f] > 0)) continue;
          tc->DecoderRowInto(f, dec.data());
          for (int i = 0; i < C; ++i) {
            dec[i] *= acts[f];
            error[i] -= dec[i];
          }
          add({QkPartKind::kFeature, l, f, acts[f]}, dec);
        }
        std::vector<float> bias(tc->decoder_bias(), tc->decoder_bias() + C);
        for (int i = 0; i < C; ++i) error[i] -= bias[i];
        add({QkPartKind::kDecoderBias, l}, std::move(bias));
      }
      add({QkPartKind::kError, l}, std::move(error));
    }
    QkPart bias{QkPartKind::kBias};
    bias.score = scale * Dot(bias_.data(), other.data(), D);
    parts_.push_back(bias);
  }
  const std::vector<QkPart>& parts() const { return parts_; }

  // Part i through the frozen LayerNorm (without its bias) and the head rows [D]; the bias part:
  // the bias.
  std::vector<float> Projected(const TranscoderSet& tcs, int i) const {
    const QkPart& part = parts_[i];
    if (part.kind == QkPartKind::kBias) return bias_;
    if (part.kind != QkPartKind::kFeature) return Project(kept_[i]);
    std::vector<float> v(C_);
    tcs.block(part.layer)->DecoderRowInto(part.feature, v.data());
    for (float& x : v) x *= part.activation;
    return Project(v);
  }

 private:
  std::vector<float> Row(const std::vector<float>& a) const {
    return std::vector<float>(a.begin() + int64_t(p_) * C_, a.begin() + int64_t(p_ + 1) * C_);
  }
  // (c - mean c) inv g W^T [D].
  std::vector<float> Project(const std::vector<float>& c) const {
    double mean = 0;
    for (float x : c) mean += x;
    mean /= C_;
    std::vector<float> n(C_);
    for (int i = 0; i < C_; ++i) n[i] = static_cast<float>((c[i] - mean) * inv_ * bw_.ln1_g[i]);
    std::vector<float> out(rows_.b.size());
    for (size_t d = 0; d < out.size(); ++d) out[d] = static_cast<float>(Dot(n.data(), rows_.w.data() + d * C_, C_));
    return out;
  }

  const Captured& cap_;
  const BlockWeights& bw_;
  HeadWeights rows_;
  int p_, C_;
  double inv_ = 0;
  std::vector<float> bias_;       // ln_1's b through the rows, plus the rows' bias [D]
  std::vector<float> projected_;
  std::vector<QkPart> parts_;     // the bias last
  std::vector<std::vector<float>> kept_;  // [parts]: every part's vector but the features'
};

// The k parts of largest share, largest first, and the rest's sum; their indices into top.
void Rank(const std::vector<QkPart>& all, int k, std::vector<QkPart>& parts, double& rest, std::vector<int>& top) {
  std::vector<int> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return std::abs(all[a].score) > std::abs(all[b].score); });
  for (size_t r = 0; r < order.size(); ++r) {
    if (r < static_cast<size_t>(k)) {
      parts.push_back(all[order[r]]);
      top.push_back(order[r]);
    } else {
      rest += all[order[r]].score;
    }
  }
}

}  // namespace

std::string QkPartKindName(const QkPart& part) {
  static const char* const kNames[] = {"embedding", "attention", "feature", "decoder bias", "error", "bias"};
  return kNames[static_cast<int>(part.kind)];
}

QkAttribution QkAttributionOf(Conversation& c, const TranscoderSet& transcoders, const std::vector<int>& ids,
                              const ScoreSpec& spec, int k) {
  if (!c.interventions().empty()) throw Error("QK attribution reads the plain model; clear the interventions first.");
  c.CheckPrompt(static_cast<int>(ids.size()));
  for (int id : ids) c.RequireToken(id);
  const Config& cfg = c.config();
  const int T = static_cast<int>(ids.size()), C = cfg.n_embd, D = cfg.head_dim(), L = spec.layer;
  CheckSpec(cfg, T, spec, k);

  Captured cap;
  cap.attn_out.resize(L);
  cap.mlp_out.resize(L);
  cap.resid_mid.resize(L);
  c.WithRestore([&] {
    Session& s = c.UnrecordedSession();
    s.Reset();
    RunOptions run;
    run.observe_all_logits = false;
    run.observer = [&](const Activation& a) {
      const auto rows = [&] { return std::vector<float>(a.data, a.data + int64_t(T) * C); };
      if (a.hook == Hook::kEmbed) cap.embed = rows();
      if (a.layer < L && a.layer >= 0) {
        if (a.hook == Hook::kAttnOut) cap.attn_out[a.layer] = rows();
        if (a.hook == Hook::kMlpOut) cap.mlp_out[a.layer] = rows();
        if (a.hook == Hook::kResidMid) cap.resid_mid[a.layer] = rows();
      }
      if (a.layer != L) return;
      const int64_t at = (int64_t(spec.head) * T + spec.query) * T + spec.key;
      if (a.hook == Hook::kResidPre) cap.resid_pre = rows();
      if (a.hook == Hook::kAttnScores) cap.score = a.data[at];
      if (a.hook == Hook::kAttnProbs) cap.probability = a.data[at];
    };
    s.Prefill(ids.data(), T, run);
    return 0;
  });

  const BlockWeights& bw = c.model().blocks[L];
  Side q(cap, bw, HeadRows(bw, 0, spec.head, C, D), spec.query, C, cfg.ln_eps);
  Side key(cap, bw, HeadRows(bw, 1, spec.head, C, D), spec.key, C, cfg.ln_eps);
  const double scale = cfg.attn_scale();
  q.Attribute(transcoders, L, key.projected(), scale);
  key.Attribute(transcoders, L, q.projected(), scale);

  QkAttribution out;
  out.spec = spec;
  out.score = cap.score;
  out.probability = cap.probability;
  std::vector<int> top_q, top_k;
  Rank(q.parts(), k, out.query_parts, out.query_rest, top_q);
  Rank(key.parts(), k, out.key_parts, out.key_rest, top_k);
  std::vector<std::vector<float>> pq, pk;
  for (int i : top_q) pq.push_back(q.Projected(transcoders, i));
  for (int j : top_k) pk.push_back(key.Projected(transcoders, j));
  for (size_t i = 0; i < pq.size(); ++i) {
    for (size_t j = 0; j < pk.size(); ++j) {
      out.pairs.push_back({static_cast<int>(i), static_cast<int>(j), scale * Dot(pq[i].data(), pk[j].data(), D)});
    }
  }
  std::stable_sort(out.pairs.begin(), out.pairs.end(),
                   [](const QkPair& a, const QkPair& b) { return std::abs(a.score) > std::abs(b.score); });
  if (out.pairs.size() > static_cast<size_t>(k)) out.pairs.resize(k);
  return out;
}

}  // namespace gpt2
