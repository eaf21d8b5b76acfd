// QK attribution of graph/qk.h: the real run's record, each side's parts through ln_1 frozen
// (model/layer_norm.h) and the head's rows of W_Q or W_K, their shares, the top parts and pairs.
#include "graph/qk.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "format/quant.h"
#include "format/tensor_type.h"
#include "model/acts.h"
#include "model/layer_norm.h"

namespace gpt2 {
namespace {

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
    DequantizeRow(bw.qkv.type, static_cast<const uint8_t*>(bw.qkv.data) + r * row_bytes,
                  out.w.data() + int64_t(d) * C, C);
  }
  out.b.assign(bw.qkv_b + part * C + head * D, bw.qkv_b + part * C + (head + 1) * D);
  return out;
}

// One side at position p of block L: its head rows, ln_1 frozen at x_p's 1/sigma, and its parts'
// shares, read from the real run's record (the embedding, and per block below L its attention and
// MLP outputs and the stream after attention; the stream entering L). A feature's vector is not
// kept (random transcoders fire thousands of features per position): Projected() rebuilds it
// from its activation and decoder row.
class Side {
 public:
  Side(const Acts& run, int L, const BlockWeights& bw, HeadWeights rows, int p, double eps)
      : run_(run), L_(L), bw_(bw), rows_(std::move(rows)), p_(p), C_(run.C) {
    const int D = static_cast<int>(rows_.b.size());
    const float* x = run.Row(run.blocks[L].resid_pre, p);
    inv_ = InvSigma(x, C_, eps);
    bias_ = rows_.b;
    for (int d = 0; d < D; ++d) {
      bias_[d] += static_cast<float>(Dot(bw.ln1_b, rows_.w.data() + int64_t(d) * C_, C_));
    }
    projected_ = Project(std::vector<float>(x, x + C_));
    for (int d = 0; d < D; ++d) projected_[d] += bias_[d];
  }
  // The side's q (or k) of the head [D]: every part and the bias.
  const std::vector<float>& projected() const { return projected_; }

  // Every part's share with the other side held at `other`, in parts() order, the bias's last.
  // Each part costs one dot product with grad = scale (W^T other) through the frozen LayerNorm.
  void Attribute(const TranscoderSet& tcs, const std::vector<float>& other, double scale) {
    const int C = C_, D = static_cast<int>(other.size());
    std::vector<double> u(C, 0.0);
    for (int d = 0; d < D; ++d) {
      const float* w = rows_.w.data() + int64_t(d) * C;
      for (int i = 0; i < C; ++i) u[i] += double(w[i]) * other[d];
    }
    std::vector<float> grad(C, 0.0f);
    FrozenLayerNormBackward(u.data(), bw_.ln1_g, scale * inv_, C, grad.data());
    const auto add = [&](QkPart part, std::vector<float> v) {
      part.score = Dot(v.data(), grad.data(), C);
      parts_.push_back(part);
      kept_.push_back(part.kind == QkPartKind::kFeature ? std::vector<float>() : std::move(v));
    };
    add({QkPartKind::kEmbedding}, Row(run_.embed));
    SaeScratch scratch;
    std::vector<float> acts, dec(C);
    for (int l = 0; l < L_; ++l) {
      const BlockActs& block = run_.blocks[l];
      add({QkPartKind::kAttention, l}, Row(block.attn_out));
      std::vector<float> error = Row(block.mlp_out);
      if (const Sae* tc = tcs.block(l)) {
        acts.resize(tc->d_sae());
        tc->Encode(run_.Row(block.resid_mid, p_), 1, acts.data(), nullptr, scratch);
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
  // Row p of a [T, C] field of the record.
  std::vector<float> Row(const std::vector<float>& field) const {
    const float* row = run_.Row(field, p_);
    return std::vector<float>(row, row + C_);
  }
  // (c - mean c) inv g W^T [D].
  std::vector<float> Project(const std::vector<float>& c) const {
    std::vector<float> n(C_);
    FrozenLayerNorm(c.data(), bw_.ln1_g, inv_, C_, n.data());
    std::vector<float> out(rows_.b.size());
    for (size_t d = 0; d < out.size(); ++d) {
      out[d] = static_cast<float>(Dot(n.data(), rows_.w.data() + d * C_, C_));
    }
    return out;
  }

  const Acts& run_;
  int L_;
  const BlockWeights& bw_;
  HeadWeights rows_;
  int p_, C_;
  double inv_ = 0;
  std::vector<float> bias_;  // ln_1's b through the rows, plus the rows' bias [D]
  std::vector<float> projected_;
  std::vector<QkPart> parts_;             // the bias last
  std::vector<std::vector<float>> kept_;  // [parts]: every part's vector but the features'
};

// The k parts of largest share, largest first, and the rest's sum; their indices into top.
void Rank(const std::vector<QkPart>& all, int k, std::vector<QkPart>& parts, double& rest,
          std::vector<int>& top) {
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
  static const char* const kNames[] = {"embedding",    "attention", "feature",
                                       "decoder bias", "error",     "bias"};
  return kNames[static_cast<int>(part.kind)];
}

void CheckQkSpec(const Config& c, int T, const ScoreSpec& spec, int k) {
  const auto range = [](const std::string& what, int v, int hi) {
    return what + " " + std::to_string(v) + " is out of range; valid " + what + "s are 0.." +
           std::to_string(hi);
  };
  if (spec.layer < 0 || spec.layer >= c.n_layer) {
    throw Error(range("block", spec.layer, c.n_layer - 1));
  }
  if (spec.head < 0 || spec.head >= c.n_head) throw Error(range("head", spec.head, c.n_head - 1));
  if (spec.query < 0 || spec.query >= T) throw Error(range("position", spec.query, T - 1));
  if (spec.key < 0 || spec.key > spec.query) {
    throw Error("key position " + std::to_string(spec.key) + " is out of range; the query at " +
                std::to_string(spec.query) + " sees positions 0.." + std::to_string(spec.query));
  }
  if (k < 1) throw Error("k must be >= 1.");
}

QkAttribution AttributeQk(Session& session, const TranscoderSet& transcoders,
                          const std::vector<int>& ids, const ScoreSpec& spec, int k) {
  const Model& model = session.model();
  const Config& cfg = model.config();
  const int T = static_cast<int>(ids.size()), C = cfg.n_embd, D = cfg.head_dim(), L = spec.layer;
  CheckQkSpec(cfg, T, spec, k);

  // The real run. Every block's scores and pattern are kept to read one of each (the record
  // keeps a hook at every block): [H, T, T] floats a block, twice what the graph of the same
  // prompt holds already.
  Acts run;
  RunOptions options;
  RecordActs(cfg,
             Keep{{Hook::kEmbed, Hook::kResidPre, Hook::kAttnScores, Hook::kAttnProbs,
                   Hook::kAttnOut, Hook::kResidMid, Hook::kMlpOut}},
             run, options);
  session.Reset();
  session.Prefill(ids.data(), T, options);

  const BlockWeights& bw = model.blocks[L];
  Side q(run, L, bw, HeadRows(bw, 0, spec.head, C, D), spec.query, cfg.ln_eps);
  Side key(run, L, bw, HeadRows(bw, 1, spec.head, C, D), spec.key, cfg.ln_eps);
  const double scale = cfg.attn_scale();
  q.Attribute(transcoders, key.projected(), scale);
  key.Attribute(transcoders, q.projected(), scale);

  QkAttribution out;
  out.spec = spec;
  const int64_t at = (int64_t(spec.head) * T + spec.query) * T + spec.key;
  out.score = run.blocks[L].scores[at];
  out.probability = run.blocks[L].pattern[at];
  std::vector<int> top_q, top_k;
  Rank(q.parts(), k, out.query_parts, out.query_rest, top_q);
  Rank(key.parts(), k, out.key_parts, out.key_rest, top_k);
  std::vector<std::vector<float>> pq, pk;
  for (int i : top_q) pq.push_back(q.Projected(transcoders, i));
  for (int j : top_k) pk.push_back(key.Projected(transcoders, j));
  for (size_t i = 0; i < pq.size(); ++i) {
    for (size_t j = 0; j < pk.size(); ++j) {
      out.pairs.push_back(
          {static_cast<int>(i), static_cast<int>(j), scale * Dot(pq[i].data(), pk[j].data(), D)});
    }
  }
  std::stable_sort(out.pairs.begin(), out.pairs.end(), [](const QkPair& a, const QkPair& b) {
    return std::abs(a.score) > std::abs(b.score);
  });
  if (out.pairs.size() > static_cast<size_t>(k)) out.pairs.resize(k);
  return out;
}

}  // namespace gpt2
