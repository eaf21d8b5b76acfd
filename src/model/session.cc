// The GPT-2 forward pass over a KV cache. Mirrors Hugging Face GPT2Model.forward (pre-LN
// blocks) with llm.c's habit of one flat buffer per activation, allocated once per Session.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "format/quant.h"
#include "model/model.h"
#include "model/thread_pool.h"

namespace gpt2 {

struct Session::Buffers {
  explicit Buffers(const Config& c, int n_threads)
      : pool(n_threads),
        x(size_t(c.n_ctx) * c.n_embd),
        xn(size_t(c.n_ctx) * c.n_embd),
        qkv(size_t(c.n_ctx) * 3 * c.n_embd),
        heads(size_t(c.n_ctx) * c.n_embd),
        tmp(size_t(c.n_ctx) * c.n_embd),
        ff(size_t(c.n_ctx) * c.n_ff),
        k_cache(size_t(c.n_layer) * c.n_ctx * c.n_embd),
        v_cache(size_t(c.n_layer) * c.n_ctx * c.n_embd),
        scores(size_t(c.n_head) * c.n_ctx),
        probs(size_t(c.n_head) * c.n_ctx),
        logits(size_t(c.n_vocab)) {}

  ThreadPool pool;
  std::vector<float> x;      // [T, C] residual stream
  std::vector<float> xn;     // [T, C] LayerNorm output
  std::vector<float> qkv;    // [T, 3C] q | k | v, heads contiguous inside each
  std::vector<float> heads;  // [T, C] attention output, heads concatenated
  std::vector<float> tmp;    // [T, C] projection outputs before the residual add
  std::vector<float> ff;     // [T, F] MLP hidden
  // Head-major so one head's keys for all positions are one contiguous stream:
  std::vector<float> k_cache;  // [L, H, n_ctx, D]
  std::vector<float> v_cache;  // [L, H, n_ctx, D]
  std::vector<float> scores;   // [H, n_ctx] per-head scratch
  std::vector<float> probs;    // [H, n_ctx]
  std::vector<float> logits;   // [V] logits of the last position
  // Only used while an observer is set (allocated on first use, then reused).
  std::vector<float> observed;      // [H, T, D] q/k/v regrouped, or [T, V] logits
  std::vector<float> obs_scores;    // [H, T, n_keys]
  std::vector<float> obs_probs;     // [H, T, n_keys]
};

Session::Session(const Model& model, int n_threads)
    : model_(model), buffers_(new Buffers(model.config(), n_threads)) {}

int Session::n_threads() const { return buffers_->pool.size(); }

Session::~Session() = default;

void Session::Truncate(int p) {
  if (p < 0 || p > position_) throw Error("cannot truncate the session to position " + std::to_string(p));
  position_ = p;
}

namespace {

// Splits a matmul's output rows over the pool in chunks of whole rows.
void ParallelMatMul(ThreadPool& pool, const float* x, int64_t T, const WeightView& w,
                    const float* bias, float* y) {
  const int64_t n_chunks = std::min<int64_t>(w.rows / 8 + 1, int64_t(pool.size()) * 4);
  if (n_chunks <= 1 || pool.size() == 1) {
    MatMul(x, T, w, bias, y, 0, w.rows);
    return;
  }
  pool.ParallelFor(n_chunks, [&](int64_t chunk) {
    const int64_t begin = w.rows * chunk / n_chunks;
    const int64_t end = w.rows * (chunk + 1) / n_chunks;
    MatMul(x, T, w, bias, y, begin, end);
  });
}

void Report(const ActivationObserver& observer, const char* name, int layer, int pos0,
            const float* data, int64_t d0, int64_t d1, int64_t d2 = 0) {
  Activation a;
  a.name = name;
  a.layer = layer;
  a.pos0 = pos0;
  a.n_dims = d2 ? 3 : 2;
  a.shape[0] = d0;
  a.shape[1] = d1;
  a.shape[2] = d2;
  a.data = data;
  observer(a);
}

}  // namespace

const float* Session::Prefill(const int* ids, int n) {
  const Config& c = model_.config();
  if (n <= 0) throw Error("nothing to run: the prompt has no tokens");
  if (position_ + n > c.n_ctx) {
    throw Error("the text is too long for the model: " + std::to_string(position_ + n) +
                " tokens, but its context holds " + std::to_string(c.n_ctx));
  }
  for (int i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= c.n_vocab) {
      throw Error("token id " + std::to_string(ids[i]) + " is outside the vocabulary (0.." +
                  std::to_string(c.n_vocab - 1) + ")");
    }
  }

  Buffers& b = *buffers_;
  const int64_t T = n, C = c.n_embd, F = c.n_ff, H = c.n_head, D = c.head_dim();
  const int pos0 = position_;
  const int64_t n_keys = pos0 + T;
  const bool observing = static_cast<bool>(observer_);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  float* x = b.x.data();

  // Embeddings: h = wte[id] + wpe[pos]. Rows are dequantized one at a time (any type).
  for (int64_t t = 0; t < T; ++t) {
    const WeightView& wte = model_.token_embedding;
    const WeightView& wpe = model_.position_embedding;
    const size_t te_row = RowBytes(wte.type, C), pe_row = RowBytes(wpe.type, C);
    DequantizeRow(wte.type, static_cast<const uint8_t*>(wte.data) + te_row * ids[t], x + t * C, C);
    DequantizeRow(wpe.type, static_cast<const uint8_t*>(wpe.data) + pe_row * (pos0 + t),
                  b.tmp.data(), C);
    AddInPlace(x + t * C, b.tmp.data(), C);
  }
  if (observing) Report(observer_, "embed", -1, pos0, x, T, C);

  if (observing) {
    b.obs_scores.resize(size_t(H) * T * n_keys);
    b.obs_probs.resize(size_t(H) * T * n_keys);
    b.observed.resize(std::max<size_t>(size_t(H) * T * D, b.observed.size()));
  }

  for (int l = 0; l < c.n_layer; ++l) {
    const BlockWeights& w = model_.blocks[l];
    // --- attention: x += proj(attn(ln_1(x)))
    for (int64_t t = 0; t < T; ++t) {
      LayerNorm(x + t * C, w.ln1_g, w.ln1_b, c.ln_eps, C, b.xn.data() + t * C);
    }
    ParallelMatMul(b.pool, b.xn.data(), T, w.qkv, w.qkv_b, b.qkv.data());

    float* k_layer = b.k_cache.data() + size_t(l) * c.n_ctx * C;  // [H, n_ctx, D]
    float* v_layer = b.v_cache.data() + size_t(l) * c.n_ctx * C;
    for (int64_t t = 0; t < T; ++t) {
      const float* row = b.qkv.data() + t * 3 * C;
      for (int64_t h = 0; h < H; ++h) {
        std::copy_n(row + C + h * D, D, k_layer + (h * c.n_ctx + pos0 + t) * D);
        std::copy_n(row + 2 * C + h * D, D, v_layer + (h * c.n_ctx + pos0 + t) * D);
      }
    }

    b.pool.ParallelFor(H, [&](int64_t h) {
      const float* k = k_layer + h * c.n_ctx * D;
      const float* v = v_layer + h * c.n_ctx * D;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t keys = pos0 + t + 1;  // causal: position pos0+t sees keys 0..pos0+t
        float* scores = observing ? b.obs_scores.data() + (h * T + t) * n_keys : nullptr;
        float* probs = observing ? b.obs_probs.data() + (h * T + t) * n_keys
                                 : b.probs.data() + h * c.n_ctx;
        AttentionHead(b.qkv.data() + t * 3 * C + h * D, k, v, D, keys, D, scale, scores, probs,
                      b.heads.data() + t * C + h * D);
        if (observing) {
          std::fill(scores + keys, scores + n_keys, -std::numeric_limits<float>::infinity());
          std::fill(probs + keys, probs + n_keys, 0.0f);
        }
      }
    });

    if (observing) {
      Report(observer_, "ln1", l, pos0, b.xn.data(), T, C);
      static const char* const kQkvNames[3] = {"q", "k", "v"};
      for (int part = 0; part < 3; ++part) {
        for (int64_t h = 0; h < H; ++h) {
          for (int64_t t = 0; t < T; ++t) {
            std::copy_n(b.qkv.data() + t * 3 * C + part * C + h * D, D,
                        b.observed.data() + (h * T + t) * D);
          }
        }
        Report(observer_, kQkvNames[part], l, pos0, b.observed.data(), H, T, D);
      }
      Report(observer_, "attn_scores", l, pos0, b.obs_scores.data(), H, T, n_keys);
      Report(observer_, "attn_probs", l, pos0, b.obs_probs.data(), H, T, n_keys);
      Report(observer_, "attn_heads", l, pos0, b.heads.data(), T, C);
    }

    ParallelMatMul(b.pool, b.heads.data(), T, w.proj, w.proj_b, b.tmp.data());
    AddInPlace(x, b.tmp.data(), T * C);
    if (observing) {
      Report(observer_, "attn_out", l, pos0, b.tmp.data(), T, C);
      Report(observer_, "resid_attn", l, pos0, x, T, C);
    }

    // --- MLP: x += fc_proj(gelu(fc(ln_2(x))))
    for (int64_t t = 0; t < T; ++t) {
      LayerNorm(x + t * C, w.ln2_g, w.ln2_b, c.ln_eps, C, b.xn.data() + t * C);
    }
    ParallelMatMul(b.pool, b.xn.data(), T, w.fc, w.fc_b, b.ff.data());
    if (observing) {
      Report(observer_, "ln2", l, pos0, b.xn.data(), T, C);
      Report(observer_, "mlp_pre", l, pos0, b.ff.data(), T, F);
    }
    Gelu(b.ff.data(), T * F);
    if (observing) Report(observer_, "mlp_act", l, pos0, b.ff.data(), T, F);
    ParallelMatMul(b.pool, b.ff.data(), T, w.fc_proj, w.fc_proj_b, b.tmp.data());
    AddInPlace(x, b.tmp.data(), T * C);
    if (observing) {
      Report(observer_, "mlp_out", l, pos0, b.tmp.data(), T, C);
      Report(observer_, "resid_out", l, pos0, x, T, C);
    }
  }

  // Final LayerNorm and the unembedding. Without an observer only the last position's logits
  // are needed, which saves (T-1) * V * C multiply-adds in a prefill.
  const int64_t first = observing ? 0 : T - 1;
  for (int64_t t = first; t < T; ++t) {
    LayerNorm(x + t * C, model_.ln_f_g, model_.ln_f_b, c.ln_eps, C, b.xn.data() + t * C);
  }
  if (observing) {
    Report(observer_, "ln_f", -1, pos0, b.xn.data(), T, C);
    b.observed.resize(std::max<size_t>(size_t(T) * c.n_vocab, b.observed.size()));
    ParallelMatMul(b.pool, b.xn.data(), T, model_.output, nullptr, b.observed.data());
    Report(observer_, "logits", -1, pos0, b.observed.data(), T, c.n_vocab);
    std::copy_n(b.observed.data() + (T - 1) * c.n_vocab, c.n_vocab, b.logits.data());
  } else {
    ParallelMatMul(b.pool, b.xn.data() + (T - 1) * C, 1, model_.output, nullptr, b.logits.data());
  }
  position_ += n;
  return b.logits.data();
}

}  // namespace gpt2
