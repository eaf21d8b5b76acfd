#include "lab/compare.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "base/error.h"
#include "convert/requantize.h"
#include "lab/conversation.h"

namespace gpt2 {

void CheckSameShape(const Config& a, const Config& b) {
  const std::pair<const char*, std::pair<int, int>> fields[] = {
      {"n_vocab", {a.n_vocab, b.n_vocab}}, {"n_ctx", {a.n_ctx, b.n_ctx}},
      {"n_embd", {a.n_embd, b.n_embd}},    {"n_head", {a.n_head, b.n_head}},
      {"n_layer", {a.n_layer, b.n_layer}}, {"n_ff", {a.n_ff, b.n_ff}}};
  for (const auto& f : fields) {
    if (f.second.first != f.second.second) {
      throw Error(std::string("The two models differ in shape: ") + f.first + " is " +
                  std::to_string(f.second.first) + " in the first and " +
                  std::to_string(f.second.second) +
                  " in the second; compare two files of the same model.");
    }
  }
}

void CheckSameVocabulary(const Tokenizer& a, const Tokenizer& b) {
  if (a.vocab_size() != b.vocab_size()) {
    throw Error("The two models' tokenizers differ: " + std::to_string(a.vocab_size()) + " and " +
                std::to_string(b.vocab_size()) + " tokens.");
  }
  for (int id = 0; id < a.vocab_size(); ++id) {
    if (a.TokenBytes(id) != b.TokenBytes(id)) {
      throw Error("The two models' tokenizers differ at token " + std::to_string(id) + ".");
    }
  }
}

namespace {

// What one model's prefill leaves for the comparison.
struct Observed {
  std::vector<std::vector<float>> resid;  // [n_layer][T, C]: blocks.L.hook_resid_post
};

// Offset of query q's row in a causal triangle of rows 0..q (q + 1 keys each).
inline size_t Tri(int64_t q) { return size_t(q) * size_t(q + 1) / 2; }

double LogSumExp(const float* x, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - max);
  return double(max) + std::log(sum);
}

int64_t ArgMax(const float* x, int64_t n) {  // ties to the lower id
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

}  // namespace

Comparison CompareModels(Session& a, Session& b, const std::vector<int>& ids,
                         const CompareOptions& options) {
  const Config& c = a.model().config();
  CheckSameShape(c, b.model().config());
  const int T = static_cast<int>(ids.size()), L = c.n_layer, H = c.n_head;
  const int64_t C = c.n_embd, V = c.n_vocab;
  if (T == 0) throw Error("The prompt is empty: give at least one token.");
  if (T > c.n_ctx) {
    throw Error("The prompt is " + std::to_string(T) +
                " tokens long, longer than the models' context of " + std::to_string(c.n_ctx) +
                " tokens.");
  }
  Comparison out;
  out.positions = T;
  Observed obs[2];
  // A's attention probabilities, [L][H] causal triangles, while B runs.
  std::vector<float> probs_a;
  const size_t tri = Tri(T);
  const bool head_drift =
      options.head_drift && size_t(L) * H * tri * sizeof(float) <= kHeadDriftBytes;
  if (head_drift) {
    probs_a.assign(size_t(L) * H * tri, 0.0f);
    out.head_drift.assign(size_t(L) * H, 0.0);
  }

  for (int m = 0; m < 2; ++m) {
    Session& s = m == 0 ? a : b;
    Observed& o = obs[m];
    o.resid.assign(L, std::vector<float>(size_t(T) * C));
    RunOptions run;
    run.observe_scores = false;
    run.observe_all_logits = false;
    run.observe_probs = head_drift;
    run.observe_whole_prompt = false;  // reports by chunks from their pos0
    run.observer = [&, m](const Activation& act) {
      if (act.hook == Hook::kResidPost) {
        std::copy_n(act.data, act.shape[0] * C, o.resid[act.layer].data() + size_t(act.pos0) * C);
      } else if (head_drift && act.hook == Hook::kAttnProbs) {
        const int64_t rows = act.shape[1], keys = act.shape[2];  // [H, rows, keys]
        for (int64_t h = 0; h < H; ++h) {
          float* tri_a = probs_a.data() + (size_t(act.layer) * H + h) * tri;
          for (int64_t t = 0; t < rows; ++t) {
            const int64_t q = act.pos0 + t;
            const float* row = act.data + (h * rows + t) * keys;
            float* saved = tri_a + Tri(q);
            if (m == 0) {
              std::copy_n(row, q + 1, saved);
            } else {
              double tv = 0;
              for (int64_t k = 0; k <= q; ++k) tv += std::fabs(double(row[k]) - saved[k]);
              out.head_drift[size_t(act.layer) * H + h] += 0.5 * tv / T;
            }
          }
        }
      }
    };
    if (options.attribution) {
      AttributionRequest request;
      request.target = m == 0 ? -1 : out.attribution_a.target;
      request.observer = run.observer;
      Attribution& dst = m == 0 ? out.attribution_a : out.attribution_b;
      dst = AttributeLogit(s, ids, request);
      dst.last_logits = nullptr;
    } else {
      s.Reset();
      s.Prefill(ids.data(), T, run);
    }
  }

  // The lens windows: each block's rows through each model's ln_f and unembedding.
  const int rows = std::min(T, kLensRows);
  std::vector<float> logits_a(size_t(rows) * V), logits_b(size_t(rows) * V);
  out.blocks.assign(L, BlockDrift());
  out.top_a.assign(T, 0);
  out.top_b.assign(T, 0);
  for (int l = 0; l < L; ++l) {
    BlockDrift& d = out.blocks[l];
    const std::vector<float>& xa_all = obs[0].resid[l];
    const std::vector<float>& xb_all = obs[1].resid[l];
    for (int p = 0; p < T; ++p) {
      const float* xa = xa_all.data() + size_t(p) * C;
      const float* xb = xb_all.data() + size_t(p) * C;
      double dot = 0, na = 0, nb = 0, diff = 0;
      for (int64_t i = 0; i < C; ++i) {
        dot += double(xa[i]) * xb[i];
        na += double(xa[i]) * xa[i];
        nb += double(xb[i]) * xb[i];
        diff += (double(xa[i]) - xb[i]) * (double(xa[i]) - xb[i]);
      }
      d.cos += (na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : (na == nb ? 1.0 : 0.0)) / T;
      d.rel += (na > 0 ? std::sqrt(diff / na) : (diff > 0 ? INFINITY : 0.0)) / T;
    }
    for (int p0 = 0; p0 < T; p0 += kLensRows) {
      const int n = std::min(kLensRows, T - p0);
      a.FinalLogits(xa_all.data() + size_t(p0) * C, n, logits_a.data());
      b.FinalLogits(xb_all.data() + size_t(p0) * C, n, logits_b.data());
      for (int r = 0; r < n; ++r) {
        const float* la = logits_a.data() + size_t(r) * V;
        const float* lb = logits_b.data() + size_t(r) * V;
        const double za = LogSumExp(la, V), zb = LogSumExp(lb, V);
        double kl = 0;
        for (int64_t v = 0; v < V; ++v) {
          const double lpa = double(la[v]) - za, lpb = double(lb[v]) - zb;
          const double pa = std::exp(lpa);
          if (pa > 0) kl += pa * (lpa - lpb);
        }
        d.kl += kl / T;
        if (l == L - 1) {
          out.top_a[p0 + r] = static_cast<int>(ArgMax(la, V));
          out.top_b[p0 + r] = static_cast<int>(ArgMax(lb, V));
        }
      }
    }
  }
  for (int p = 0; p < T; ++p) out.agree += out.top_a[p] == out.top_b[p];
  return out;
}

SecondModel::SecondModel(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {
  file_ = GgufFile::Parse(bytes_.data(), bytes_.size());
  model_ = Model::FromGguf(file_);
  session_ = std::make_unique<Session>(*model_, 1);
}

std::unique_ptr<SecondModel> SecondModel::Requantized(const GgufFile& source,
                                                      TensorType matrix_type) {
  GgufRequantizeInMemory job(source, matrix_type, UINT64_MAX);
  while (job.ConvertNext() < job.num_tensors()) {
  }
  return std::make_unique<SecondModel>(job.TakeOutput());
}

const char* SecondModel::matrix_type() const {
  return GgmlTypeName(static_cast<uint32_t>(model_->blocks[0].qkv.type));
}

Comparison CompareOnConversation(Conversation& conversation, SecondModel& b,
                                 const std::vector<int>& ids) {
  CheckSameShape(conversation.config(), b.model().config());
  conversation.CheckPrompt(static_cast<int>(ids.size()));
  for (int id : ids) conversation.RequireToken(id);
  CompareOptions options;
  options.head_drift = true;
  options.attribution = true;
  Comparison out;
  try {
    out = CompareModels(conversation.UnrecordedSession(), b.session(), ids, options);
  } catch (...) {
    conversation.Reset();  // the session's positions again what the conversation knows of
    throw;
  }
  conversation.SetInterventions(Interventions());
  conversation.Restart(ids);
  return out;
}

}  // namespace gpt2
