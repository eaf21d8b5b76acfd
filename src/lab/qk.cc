#include "lab/qk.h"

#include <algorithm>
#include <cmath>
#include <string>

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

// The parts of the stream entering block L at one position (the header's list), as vectors.
struct StreamParts {
  std::vector<QkPart> parts;
  std::vector<std::vector<float>> vectors;  // [parts][C]
};

// What the real run leaves: per block below L the attention and MLP outputs and the stream after
// attention [T, C], the embedding, the stream entering L, and L's scores and probabilities.
struct Captured {
  std::vector<std::vector<float>> attn_out, mlp_out, resid_mid;
  std::vector<float> embed, resid_pre, scores, probs;
};

StreamParts PartsAt(const Captured& cap, const TranscoderSet& tcs, int L, int p, int C) {
  StreamParts out;
  const auto row = [&](const std::vector<float>& a) { return std::vector<float>(a.begin() + int64_t(p) * C, a.begin() + int64_t(p + 1) * C); };
  const auto add = [&](QkPart part, std::vector<float> v) {
    out.parts.push_back(part);
    out.vectors.push_back(std::move(v));
  };
  add({QkPartKind::kEmbedding}, row(cap.embed));
  SaeScratch scratch;
  std::vector<float> acts, dec(C);
  for (int l = 0; l < L; ++l) {
    add({QkPartKind::kAttention, l}, row(cap.attn_out[l]));
    std::vector<float> error = row(cap.mlp_out[l]);
    if (const Sae* tc = tcs.block(l)) {
      acts.resize(tc->d_sae());
      tc->Encode(cap.resid_mid[l].data() + int64_t(p) * C, 1, acts.data(), nullptr, scratch);
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
  return out;
}

// One side: x_p's parts, ln_1 frozen at x_p's 1/sigma and projected by this side's head rows.
struct Side {
  StreamParts parts;
  double inv = 0;
  std::vector<float> projected;  // the side's q (or k) [D] from every part and the bias
  std::vector<float> bias;       // ln_1's b through the rows, plus the rows' bias [D]
};

// The side's [D] of (c - mean c) inv g W^T (c null: the bias part's).
std::vector<float> Project(const std::vector<float>* c, const Side& s, const BlockWeights& bw, const HeadWeights& hw,
                           int C, int D) {
  if (c == nullptr) return s.bias;
  double mean = 0;
  for (float x : *c) mean += x;
  mean /= C;
  std::vector<float> n(C);
  for (int i = 0; i < C; ++i) n[i] = static_cast<float>(((*c)[i] - mean) * s.inv * bw.ln1_g[i]);
  std::vector<float> out(D);
  for (int d = 0; d < D; ++d) out[d] = static_cast<float>(Dot(n.data(), hw.w.data() + int64_t(d) * C, C));
  return out;
}

// Each part's share of the score: its vector through the frozen LayerNorm and the rows, dotted
// with the other side's full projection; the bias part last.
std::vector<double> Shares(const Side& s, const std::vector<float>& other, const BlockWeights& bw,
                           const HeadWeights& hw, int C, double scale) {
  // grad = n'^T W^T other scale: one [C] vector, so each part costs one dot product.
  const int D = static_cast<int>(other.size());
  std::vector<double> u(C, 0.0);
  for (int d = 0; d < D; ++d) {
    const float* w = hw.w.data() + int64_t(d) * C;
    for (int i = 0; i < C; ++i) u[i] += double(w[i]) * other[d];
  }
  double mean = 0;
  for (int i = 0; i < C; ++i) mean += u[i] * bw.ln1_g[i];
  mean /= C;
  std::vector<float> grad(C);
  for (int i = 0; i < C; ++i) grad[i] = static_cast<float>(scale * s.inv * (u[i] * bw.ln1_g[i] - mean));
  std::vector<double> out;
  for (const std::vector<float>& v : s.parts.vectors) out.push_back(Dot(v.data(), grad.data(), C));
  out.push_back(scale * Dot(s.bias.data(), other.data(), D));
  return out;
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
      if (a.hook == Hook::kAttnScores) cap.scores.assign(1, a.data[at]);
      if (a.hook == Hook::kAttnProbs) cap.probs.assign(1, a.data[at]);
    };
    s.Prefill(ids.data(), T, run);
    return 0;
  });

  const BlockWeights& bw = c.model().blocks[L];
  const HeadWeights wq = HeadRows(bw, 0, spec.head, C, D), wk = HeadRows(bw, 1, spec.head, C, D);
  const auto side = [&](int p, const HeadWeights& hw) {
    Side s;
    s.parts = PartsAt(cap, transcoders, L, p, C);
    const float* x = cap.resid_pre.data() + int64_t(p) * C;
    double mean = 0, var = 0;
    for (int i = 0; i < C; ++i) mean += x[i];
    mean /= C;
    for (int i = 0; i < C; ++i) var += (x[i] - mean) * (x[i] - mean);
    s.inv = 1.0 / std::sqrt(var / C + cfg.ln_eps);
    s.bias = hw.b;
    for (int d = 0; d < D; ++d) s.bias[d] += static_cast<float>(Dot(bw.ln1_b, hw.w.data() + int64_t(d) * C, C));
    const std::vector<float> whole(x, x + C);
    s.projected = Project(&whole, s, bw, hw, C, D);
    for (int d = 0; d < D; ++d) s.projected[d] += s.bias[d];
    return s;
  };
  const Side q = side(spec.query, wq), key = side(spec.key, wk);
  const double scale = cfg.attn_scale();

  QkAttribution out;
  out.spec = spec;
  out.score = cap.scores.at(0);
  out.probability = cap.probs.at(0);
  // Each side's parts by share, largest magnitude first; the bias part is index parts.size().
  std::vector<int> top_q, top_k;
  const auto rank = [&](const Side& s, const std::vector<float>& other, const HeadWeights& hw,
                        std::vector<QkPart>& parts, double& rest, std::vector<int>& top) {
    const std::vector<double> shares = Shares(s, other, bw, hw, C, scale);
    std::vector<int> order(shares.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return std::abs(shares[a]) > std::abs(shares[b]); });
    for (size_t r = 0; r < order.size(); ++r) {
      const int i = order[r];
      if (r >= static_cast<size_t>(k)) {
        rest += shares[i];
        continue;
      }
      QkPart part = i < static_cast<int>(s.parts.parts.size()) ? s.parts.parts[i] : QkPart{QkPartKind::kBias};
      part.score = shares[i];
      parts.push_back(part);
      top.push_back(i);
    }
  };
  rank(q, key.projected, wq, out.query_parts, out.query_rest, top_q);
  rank(key, q.projected, wk, out.key_parts, out.key_rest, top_k);

  const auto projected = [&](const Side& s, const HeadWeights& hw, int i) {
    return Project(i < static_cast<int>(s.parts.vectors.size()) ? &s.parts.vectors[i] : nullptr, s, bw, hw, C, D);
  };
  std::vector<std::vector<float>> pq, pk;
  for (int i : top_q) pq.push_back(projected(q, wq, i));
  for (int j : top_k) pk.push_back(projected(key, wk, j));
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
