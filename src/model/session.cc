// The GPT-2 forward pass over a KV cache. Mirrors Hugging Face GPT2Model.forward (pre-LN
// blocks) with llm.c's habit of one flat buffer per activation, allocated once per Session.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "base/error.h"
#include "format/quant.h"
#include "model/model.h"
#include "model/thread_pool.h"

namespace gpt2 {

namespace {

// Storage on a cache line (64 bytes, AVX-512's vector): a plain std::vector's large buffers come
// from mmap 16 bytes past a page start, so every 64-byte load of an activation row straddled two
// lines.
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{64}); }
  bool operator==(const CacheLineAllocator&) const { return true; }
  bool operator!=(const CacheLineAllocator&) const { return false; }
};
using Activations = std::vector<float, CacheLineAllocator<float>>;

// Leaves a vector's elements uninitialized where a plain one would zero them: for the 8-bit KV
// cache, where no kernel reads a position before it is written (AttentionHead weighs the unused
// partner of an odd last key with 0). Zeroing 20 MB of fresh memory faulted in every page of it
// at load (~60 ms of a cached reload on the AMD EPYC guest, BENCHMARKS.md); now only the pages
// of positions in use are touched.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
};
template <typename T>
using KvVector = std::vector<T, UninitializedAllocator<T>>;

}  // namespace

struct Session::Buffers {
  Buffers(const Config& c, int n_threads, QuantActivations act)
      : config(c),
        activations(act),
        pool(n_threads),
        k_cache(c.kv_cache == Config::KvCache::kF32 ? size_t(c.n_layer) * c.n_ctx * c.n_embd : 0),
        v_cache(k_cache.size()),
        k_cache16(c.kv_cache == Config::KvCache::kF16 ? size_t(c.n_layer) * c.n_ctx * c.n_embd : 0),
        v_cache16(k_cache16.size()),
        k_cache8(c.kv_cache == Config::KvCache::kQ8_0 ? size_t(c.n_layer) * c.n_head * c.kv8_head_quants() : 0),
        v_cache8(k_cache8.size()),
        k_scale8(c.kv_cache == Config::KvCache::kQ8_0 ? size_t(c.n_layer) * c.n_head * c.kv8_head_scales() : 0),
        v_scale8(k_scale8.size()),
        scores(size_t(c.n_head) * c.n_ctx),
        probs(size_t(c.n_head) * c.n_ctx),
        logits(size_t(c.n_vocab)) {}

  // The per-position activations grow to the most positions one call has run (a plain prefill
  // runs at most kPrefillChunk at a time), instead of n_ctx up front: a loaded model then holds
  // the file and the KV cache, not ~35 MB of GPT-2 small's activations it may never use.
  void EnsureRows(int64_t rows) {
    if (rows <= rows_) return;
    const size_t T = size_t(rows), C = size_t(config.n_embd);
    for (Activations* v : {&x, &xn, &heads, &tmp}) v->resize(T * C);
    qkv.resize(T * 3 * C);
    ff.resize(T * size_t(config.n_ff));
    rows_ = rows;
  }

  const Config config;
  const QuantActivations activations;  // for every MatMul of Q8_0/Q4_0 weights
  int64_t rows_ = 0;
  ThreadPool pool;
  MatMulInput matmul_input;  // the activations of the matmul running now (ParallelMatMul)
  Activations x;      // [T, C] residual stream
  Activations xn;     // [T, C] LayerNorm output
  Activations qkv;    // [T, 3C] q | k | v, heads contiguous inside each
  Activations heads;  // [T, C] attention output, heads concatenated
  Activations tmp;    // [T, C] projection outputs before the residual add
  Activations ff;     // [T, F] MLP hidden
  // Head-major so one head's keys for all positions are one contiguous stream, in the format
  // config.kv_cache names (the other buffers are empty): f32, f16 bits, or 8 bits (kernels.h
  // KvHeadQ8: per head config.kv8_head_quants() quants and kv8_head_scales() f16 scales, keys
  // and values apart, for a cache of kv_capacity positions).
  std::vector<float> k_cache;         // [L, H, n_ctx, D]
  std::vector<float> v_cache;         // [L, H, n_ctx, D]
  std::vector<uint16_t> k_cache16;    // [L, H, n_ctx, D]
  std::vector<uint16_t> v_cache16;    // [L, H, n_ctx, D]
  KvVector<int8_t> k_cache8;          // [L, H, kv8_head_quants]
  KvVector<int8_t> v_cache8;          // [L, H, kv8_head_quants]
  KvVector<uint16_t> k_scale8;        // [L, H, kv8_head_scales]
  KvVector<uint16_t> v_scale8;        // [L, H, kv8_head_scales]
  std::vector<float> scores;   // [H, n_ctx] per-head scratch
  std::vector<float> probs;    // [H, n_ctx]
  std::vector<float> logits;   // [V] logits of the last position
  // Only used while an observer is set (allocated on first use, then reused).
  std::vector<float> observed;      // [H, T, D] q/k/v regrouped, or [T, V] logits
  std::vector<float> obs_scores;    // [H, T, n_keys]
  std::vector<float> obs_probs;     // [H, T, n_keys]
};

Session::Session(const Model& model, int n_threads, QuantActivations activations)
    : model_(model), buffers_(new Buffers(model.config(), n_threads, activations)) {}

int Session::n_threads() const { return buffers_->pool.size(); }

Session::~Session() = default;

void Session::Truncate(int p) {
  if (p < 0 || p > position_) throw Error("cannot truncate the session to position " + std::to_string(p));
  position_ = p;
}

namespace {

// Queries per prefill chunk from which AttentionStep widens a head's f16 keys and values to f32
// once (one vector pass over them) instead of per query in the kernel (a vector pass each).
constexpr int64_t kWidenKvFrom = 16;

// Splits a matmul's output rows over the pool in chunks of whole rows. x is prepared (for
// int8 activations: quantized) once into `in`, which every chunk then reads; with enough tokens
// the preparation is split over the pool by tokens too (serial, it was ~2% of a wasm prefill).
// With gelu, y = gelu(x W^T + bias): each chunk applies GELU to its own columns while they are
// in cache, in parallel, with the same bits as one Gelu over all of y (it is elementwise).
void ParallelMatMul(ThreadPool& pool, MatMulInput& in, const float* x, int64_t T,
                    const WeightView& w, const float* bias, float* y, QuantActivations act,
                    bool gelu = false) {
  StartMatMulInput(x, T, w, act, in);
  // Below a few tokens per thread a wake-up of the pool costs more than it saves.
  const int64_t n_parts = T >= 16 ? pool.size() : 1;
  if (n_parts > 1) {
    pool.ParallelFor(n_parts, [&](int64_t part) {
      PrepareMatMulInputRows(in, T * part / n_parts, T * (part + 1) / n_parts);
    });
  } else {
    PrepareMatMulInputRows(in, 0, T);
  }
  const auto run = [&](int64_t begin, int64_t end) {
    MatMul(in, w, bias, y, begin, end);
    if (gelu) {
      for (int64_t t = 0; t < T; ++t) Gelu(y + t * w.rows + begin, end - begin);
    }
  };
  // Chunks of whole row grains: every row gets the bits one thread would compute.
  const int64_t grains = (w.rows + kMatMulRowGrain - 1) / kMatMulRowGrain;
  const int64_t n_chunks = std::min<int64_t>(grains, int64_t(pool.size()) * 4);
  if (n_chunks <= 1 || pool.size() == 1) {
    run(0, w.rows);
    return;
  }
  const auto bound = [&](int64_t chunk) {
    return std::min(w.rows, grains * chunk / n_chunks * kMatMulRowGrain);
  };
  pool.ParallelFor(n_chunks, [&](int64_t chunk) { run(bound(chunk), bound(chunk + 1)); });
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


// A sublayer's input xn [T, C]: its LayerNorm of the stream x (pre-LN), or x itself under
// post-norm, where the LayerNorm comes after the residual write instead (WriteSublayer).
void ReadSublayer(bool post_norm, const float* x, const float* ln_g, const float* ln_b, float* xn,
                  int64_t T, int64_t C, float eps) {
  if (post_norm) {
    std::copy_n(x, T * C, xn);
    return;
  }
  for (int64_t t = 0; t < T; ++t) LayerNorm(x + t * C, ln_g, ln_b, eps, C, xn + t * C);
}

// The residual write of a sublayer's output `out` [T, C] into the stream x [T, C]: x += out
// for the plain model; under interventions the write is skipped (skip list), replaces the stream
// (no residual), and under post-norm is followed by the sublayer's LayerNorm (ln_g, ln_b).
// Both sublayers end this way; only the skip list and the LayerNorm differ.
void WriteSublayer(const Interventions* iv, int layer, bool skip, const float* out,
                   const float* ln_g, const float* ln_b, float* x, int64_t T, int64_t C, float eps) {
  if (iv == nullptr) {
    AddInPlace(x, out, T * C);
    return;
  }
  if (skip) return;
  if (Interventions::Lists(iv->no_residual, layer)) std::copy_n(out, T * C, x);
  else AddInPlace(x, out, T * C);
  if (iv->post_norm) {
    for (int64_t t = 0; t < T; ++t) LayerNorm(x + t * C, ln_g, ln_b, eps, C, x + t * C);
  }
}

}  // namespace

void Interventions::Validate(const Config& c) const {
  const std::string layers = "valid layers are 0.." + std::to_string(c.n_layer - 1);
  auto check_layer = [&](int l, const char* what) {
    if (l < 0 || l >= c.n_layer) {
      throw Error(std::string(what) + ": layer " + std::to_string(l) + " is out of range; " + layers);
    }
  };
  for (const HeadRef& h : ablate_heads) {
    check_layer(h.layer, "ablate heads");
    if (h.head < 0 || h.head >= c.n_head) {
      throw Error("ablate heads: head " + std::to_string(h.head) + " is out of range; valid heads are 0.." +
                  std::to_string(c.n_head - 1));
    }
  }
  if (!head_means.empty() && head_means.size() != size_t(c.n_layer) * c.n_embd) {
    throw Error("mean ablation needs " + std::to_string(c.n_layer) + " x " + std::to_string(c.n_embd) +
                " head means, got " + std::to_string(head_means.size()));
  }
  for (int l : skip_attn) check_layer(l, "skip attention");
  for (int l : skip_mlp) check_layer(l, "skip MLP");
  for (int l : no_residual) check_layer(l, "no residual");
  for (const ResidPatch& p : patches) {
    check_layer(p.layer, "patch");
    if (p.position < 0 || p.position >= c.n_ctx) {
      throw Error("patch: position " + std::to_string(p.position) + " is out of range; valid positions are 0.." +
                  std::to_string(c.n_ctx - 1));
    }
    if (p.value.size() != size_t(c.n_embd)) {
      throw Error("patch: the residual vector has " + std::to_string(p.value.size()) + " values, the model " +
                  std::to_string(c.n_embd));
    }
  }
}

int Interventions::FirstChangedBlock(int n_layer) const {
  if (post_norm) return 0;
  int first = n_layer;
  for (const HeadRef& h : ablate_heads) first = std::min(first, h.layer);
  for (int l : skip_attn) first = std::min(first, l);
  for (int l : skip_mlp) first = std::min(first, l);
  for (int l : no_residual) first = std::min(first, l);
  for (const ResidPatch& p : patches) first = std::min(first, p.layer);
  return first;
}

const float* Session::Prefill(const int* ids, int n, const RunOptions& run) {
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
  if (run.interventions != nullptr) run.interventions->Validate(c);
  // A chunk is a multiple of the kernels' 4-token tiles, so every position meets the same
  // arithmetic as in one pass and the blocks' results are the same bits.
  const int chunk = run.observer && run.observe_whole_prompt ? n : kPrefillChunk;
  const float* logits = nullptr;
  StartBlockTimes(0, run);
  for (int i = 0; i < n; i += chunk) {
    const int m = std::min(chunk, n - i);
    buffers_->EnsureRows(m);
    Embed(ids + i, m, run);
    logits = RunBlocks(0, m, run);
  }
  return logits;
}

const float* Session::Rerun(int n, int first_block, const float* resid_in, const RunOptions& run) {
  return RerunFrom(n, first_block, resid_in, run, true);
}

const float* Session::RerunFrom(int n, int first_block, const float* resid_in, const RunOptions& run,
                                bool unembed) {
  const Config& c = model_.config();
  if (n <= 0 || n > position_) {
    throw Error("cannot re-run " + std::to_string(n) + " positions: the session holds " +
                std::to_string(position_));
  }
  if (first_block < 0 || first_block > c.n_layer) {
    throw Error("re-run: block " + std::to_string(first_block) + " is out of range; valid blocks are 0.." +
                std::to_string(c.n_layer));
  }
  if (run.interventions != nullptr) {
    run.interventions->Validate(c);
    if (run.interventions->FirstChangedBlock(c.n_layer) < first_block) {
      throw Error("re-run from block " + std::to_string(first_block) +
                  ": the interventions change an earlier block, so its cache cannot be reused");
    }
  }
  position_ -= n;
  buffers_->EnsureRows(n);
  std::copy_n(resid_in, size_t(n) * c.n_embd, buffers_->x.data());
  StartBlockTimes(first_block, run);
  return RunBlocks(first_block, n, run, unembed);
}

const float* Session::RerunPositions(int begin, int end, int first_block, const float* resid_in,
                                    const RunOptions& run) {
  return RerunRows(begin, end, first_block, resid_in, run, true);
}

const float* Session::RerunPositionsToStream(int begin, int end, int first_block, const float* resid_in,
                                            const RunOptions& run) {
  return RerunRows(begin, end, first_block, resid_in, run, false);
}

const float* Session::RerunRows(int begin, int end, int first_block, const float* resid_in,
                                const RunOptions& run, bool unembed) {
  const int held = position_;
  if (begin < 0 || begin >= end || end > held) {
    throw Error("cannot re-run positions " + std::to_string(begin) + ".." + std::to_string(end - 1) +
                ": the session holds 0.." + std::to_string(held - 1));
  }
  position_ = end;  // Rerun then runs the last end - begin of them
  const float* logits;
  try {
    logits = RerunFrom(end - begin, first_block, resid_in, run, unembed);
  } catch (...) {
    position_ = held;
    throw;
  }
  position_ = held;
  return logits;
}

// Blocks [first_block, L) of this call start at 0 ms; RunBlocks adds each chunk's time.
void Session::StartBlockTimes(int first_block, const RunOptions& run) {
  if (run.block_ms == nullptr) return;
  const int L = model_.config().n_layer;
  run.block_ms->resize(L, 0.0);
  std::fill(run.block_ms->begin() + first_block, run.block_ms->end(), 0.0);
}

const float* Session::RunBlocks(int first_block, int T, const RunOptions& run, bool unembed) {
  const Interventions* iv = run.interventions;
  const int L = model_.config().n_layer;
  const int64_t C = model_.config().n_embd;
  float* x = buffers_->x.data();
  int64_t last = T - 1;  // the row of x holding position position_ + T - 1
  for (int l = first_block; l < L; ++l) {
    const auto start = run.block_ms != nullptr ? std::chrono::steady_clock::now()
                                               : std::chrono::steady_clock::time_point();
    if (iv != nullptr && !iv->patches.empty()) PatchResidual(l, T, *iv);
    if (l == L - 1 && T > 1 && !run.observer) {
      // Only the last row leaves this call (its logits, or its residual stream for a probe),
      // and of the other rows of the last block only the keys and values are ever read again:
      // they skip the MLP (2/3 of a block's work), as llama.cpp's last layer keeps only the
      // rows whose logits are wanted. Attention runs on all rows at once, so the cache gets
      // the same bits as from a full pass; the last row's MLP then runs alone, as in a decode
      // step (the same values to rounding: the one-row kernels sum in another order).
      AttentionStep(l, T, run);
      std::copy_n(x + last * C, C, x);
      last = 0;
      position_ += T - 1;
      MlpStep(l, 1, run);
      position_ -= T - 1;
    } else {
      AttentionStep(l, T, run);
      MlpStep(l, T, run);
    }
    if (run.block_ms != nullptr) {
      (*run.block_ms)[l] +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
  }
  const float* out = unembed ? Unembed(T, last, run) : x + last * C;
  position_ += T;
  return out;
}

// h = wte[id] + wpe[pos]. Rows are dequantized one at a time (any type).
// TransformerLens: hook_embed + hook_pos_embed, reported summed as "embed".
void Session::Embed(const int* ids, int T, const RunOptions& run) {
  Buffers& b = *buffers_;
  const int64_t C = model_.config().n_embd;
  const WeightView& wte = model_.token_embedding;
  const WeightView& wpe = model_.position_embedding;
  const size_t te_row = RowBytes(wte.type, C), pe_row = RowBytes(wpe.type, C);
  float* x = b.x.data();
  for (int64_t t = 0; t < T; ++t) {
    DequantizeRow(wte.type, static_cast<const uint8_t*>(wte.data) + te_row * ids[t], x + t * C, C);
    DequantizeRow(wpe.type, static_cast<const uint8_t*>(wpe.data) + pe_row * (position_ + t),
                  b.tmp.data(), C);
    AddInPlace(x + t * C, b.tmp.data(), C);
  }
  if (run.observer) Report(run.observer, "embed", -1, position_, x, T, C);
}

void Session::PatchResidual(int layer, int T, const Interventions& iv) {
  const int64_t C = model_.config().n_embd;
  for (const ResidPatch& p : iv.patches) {
    const int t = p.position - position_;
    if (p.layer == layer && t >= 0 && t < T) {
      std::copy_n(p.value.data(), C, buffers_->x.data() + t * C);
    }
  }
}

// Pre-LN: x += proj(attn(ln_1(x))). With interventions also: heads ablated before the
// projection, the add skipped, replaced (no residual) or followed by ln_1 (post-norm).
void Session::AttentionStep(int l, int T_int, const RunOptions& run) {
  const Config& c = model_.config();
  Buffers& b = *buffers_;
  const BlockWeights& w = model_.blocks[l];
  const int64_t T = T_int, C = c.n_embd, H = c.n_head, D = c.head_dim();
  const int pos0 = position_;
  const int64_t n_keys = pos0 + T;
  const bool observing = static_cast<bool>(run.observer);
  const Interventions* iv = run.interventions;
  const bool post_norm = iv != nullptr && iv->post_norm;
  const float scale = c.attn_scale();
  float* x = b.x.data();

  ReadSublayer(post_norm, x, w.ln1_g, w.ln1_b, b.xn.data(), T, C, c.ln_eps);
  ParallelMatMul(b.pool, b.matmul_input, b.xn.data(), T, w.qkv, w.qkv_b, b.qkv.data(),
                 b.activations);

  using KvCache = Config::KvCache;
  const size_t layer_offset = size_t(l) * c.n_ctx * C;  // layer l's [H, n_ctx, D]
  const bool f16 = c.kv_cache == KvCache::kF16, q8 = c.kv_cache == KvCache::kQ8_0;
  float* k_layer = c.kv_cache == KvCache::kF32 ? b.k_cache.data() + layer_offset : nullptr;
  float* v_layer = c.kv_cache == KvCache::kF32 ? b.v_cache.data() + layer_offset : nullptr;
  uint16_t* k_layer16 = f16 ? b.k_cache16.data() + layer_offset : nullptr;
  uint16_t* v_layer16 = f16 ? b.v_cache16.data() + layer_offset : nullptr;
  const int64_t capacity = c.kv_capacity();
  // Head h of layer l in the 8-bit cache: its keys' and values' quants and scales.
  struct Q8Head {
    int8_t* kq = nullptr;
    uint16_t* kd = nullptr;
    int8_t* vq = nullptr;
    uint16_t* vd = nullptr;
  };
  const auto q8_head = [&](int64_t h) {
    const size_t head = size_t(l) * H + size_t(h);
    const size_t quants = head * c.kv8_head_quants(), scales = head * c.kv8_head_scales();
    return Q8Head{b.k_cache8.data() + quants, b.k_scale8.data() + scales,
                  b.v_cache8.data() + quants, b.v_scale8.data() + scales};
  };
  // Head h's keys and values of positions [pos0, pos0 + T) into the cache, by the thread that
  // then attends over them (stored serially, the 8-bit rows were ~3 % of a two-thread prefill).
  const auto store_head = [&](int64_t h, const Q8Head& h8) {
    for (int64_t t = 0; t < T; ++t) {
      const float* row = b.qkv.data() + t * 3 * C;
      const int64_t at = (h * c.n_ctx + pos0 + t) * D;
      if (q8) {
        StoreKeyQ8(row + C + h * D, D, pos0 + t, h8.kq, h8.kd, capacity);
        StoreValueQ8(row + 2 * C + h * D, D, pos0 + t, h8.vq, h8.vd, capacity);
      } else if (f16) {
        F32ToF16Saturated(row + C + h * D, k_layer16 + at, D);
        F32ToF16Saturated(row + 2 * C + h * D, v_layer16 + at, D);
      } else {
        std::copy_n(row + C + h * D, D, k_layer + at);
        std::copy_n(row + 2 * C + h * D, D, v_layer + at);
      }
    }
  };

  const bool scoring = observing && run.observe_scores;
  const bool keep_probs = observing && run.observe_probs;
  if (observing) {
    if (scoring) b.obs_scores.resize(size_t(H) * T * n_keys);
    if (keep_probs) b.obs_probs.resize(size_t(H) * T * n_keys);
    b.observed.resize(std::max<size_t>(size_t(H) * T * D, b.observed.size()));
  }
  // A prefill's queries of one head all read the same f16 keys and values: widened to f32 once
  // per head here, the f32 kernel gives the f16 kernel's bits (kernels.h) without converting
  // every key again for every query.
  const bool widen = f16 && T >= kWidenKvFrom;
  b.pool.ParallelFor(H, [&](int64_t h) {
    const Q8Head h8 = q8 ? q8_head(h) : Q8Head{};
    store_head(h, h8);
    const int64_t head_offset = h * c.n_ctx * D;
    static thread_local std::vector<float> kv32;  // [2, n_keys, D]: keys, then values
    if (widen) {
      const size_t n = size_t(n_keys) * D;
      if (kv32.size() < 2 * n) kv32.resize(2 * n);
      F16ToF32(k_layer16 + head_offset, kv32.data(), int64_t(n));
      F16ToF32(v_layer16 + head_offset, kv32.data() + n, int64_t(n));
    }
    const KvHeadQ8 keys8{h8.kq, h8.kd, capacity}, values8{h8.vq, h8.vd, capacity};
    for (int64_t t = 0; t < T; ++t) {
      const int64_t keys = pos0 + t + 1;  // causal: position pos0+t sees keys 0..pos0+t
      float* scores = scoring ? b.obs_scores.data() + (h * T + t) * n_keys : nullptr;
      float* probs = keep_probs ? b.obs_probs.data() + (h * T + t) * n_keys
                                : b.probs.data() + h * c.n_ctx;
      const float* q = b.qkv.data() + t * 3 * C + h * D;
      float* out = b.heads.data() + t * C + h * D;
      if (q8) {
        AttentionHead(q, keys8, values8, keys, D, scale, scores, probs, out);
      } else if (widen) {
        AttentionHead(q, kv32.data(), kv32.data() + size_t(n_keys) * D, D, keys, D, scale, scores,
                      probs, out);
      } else if (f16) {
        AttentionHead(q, k_layer16 + head_offset, v_layer16 + head_offset, D, keys, D, scale,
                      scores, probs, out);
      } else {
        AttentionHead(q, k_layer + head_offset, v_layer + head_offset, D, keys, D, scale, scores,
                      probs, out);
      }
      if (scoring) std::fill(scores + keys, scores + n_keys, -std::numeric_limits<float>::infinity());
      if (keep_probs) std::fill(probs + keys, probs + n_keys, 0.0f);
    }
  });

  // Head ablation (TransformerLens: blocks.l.attn.hook_z[:, h] = 0 or its mean).
  if (iv != nullptr) {
    for (const HeadRef& a : iv->ablate_heads) {
      if (a.layer != l) continue;
      for (int64_t t = 0; t < T; ++t) {
        float* z = b.heads.data() + t * C + a.head * D;
        if (iv->head_means.empty()) std::fill_n(z, D, 0.0f);
        else std::copy_n(iv->head_means.data() + size_t(l) * C + a.head * D, D, z);
      }
    }
  }

  if (observing) {
    Report(run.observer, "ln1", l, pos0, b.xn.data(), T, C);
    static const char* const kQkvNames[3] = {"q", "k", "v"};
    for (int part = 0; part < 3; ++part) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t t = 0; t < T; ++t) {
          std::copy_n(b.qkv.data() + t * 3 * C + part * C + h * D, D,
                      b.observed.data() + (h * T + t) * D);
        }
      }
      Report(run.observer, kQkvNames[part], l, pos0, b.observed.data(), H, T, D);
    }
    if (scoring) Report(run.observer, "attn_scores", l, pos0, b.obs_scores.data(), H, T, n_keys);
    if (keep_probs) Report(run.observer, "attn_probs", l, pos0, b.obs_probs.data(), H, T, n_keys);
    Report(run.observer, "attn_heads", l, pos0, b.heads.data(), T, C);
  }

  ParallelMatMul(b.pool, b.matmul_input, b.heads.data(), T, w.proj, w.proj_b, b.tmp.data(),
                 b.activations);
  const bool skip = iv != nullptr && Interventions::Lists(iv->skip_attn, l);
  WriteSublayer(iv, l, skip, b.tmp.data(), w.ln1_g, w.ln1_b, x, T, C, c.ln_eps);
  if (observing) {
    Report(run.observer, "attn_out", l, pos0, b.tmp.data(), T, C);
    Report(run.observer, "resid_attn", l, pos0, x, T, C);
  }
}

// Pre-LN: x += fc_proj(gelu(fc(ln_2(x)))); interventions as in AttentionStep.
void Session::MlpStep(int l, int T_int, const RunOptions& run) {
  const Config& c = model_.config();
  Buffers& b = *buffers_;
  const BlockWeights& w = model_.blocks[l];
  const int64_t T = T_int, C = c.n_embd, F = c.n_ff;
  const int pos0 = position_;
  const bool observing = static_cast<bool>(run.observer);
  const Interventions* iv = run.interventions;
  const bool post_norm = iv != nullptr && iv->post_norm;
  float* x = b.x.data();

  ReadSublayer(post_norm, x, w.ln2_g, w.ln2_b, b.xn.data(), T, C, c.ln_eps);
  // GELU runs inside fc's row chunks unless the observer wants fc's output before it.
  ParallelMatMul(b.pool, b.matmul_input, b.xn.data(), T, w.fc, w.fc_b, b.ff.data(), b.activations,
                 !observing);
  if (observing) {
    Report(run.observer, "ln2", l, pos0, b.xn.data(), T, C);
    Report(run.observer, "mlp_pre", l, pos0, b.ff.data(), T, F);
    Gelu(b.ff.data(), T * F);
    Report(run.observer, "mlp_act", l, pos0, b.ff.data(), T, F);
  }
  ParallelMatMul(b.pool, b.matmul_input, b.ff.data(), T, w.fc_proj, w.fc_proj_b, b.tmp.data(),
                 b.activations);
  const bool skip = iv != nullptr && Interventions::Lists(iv->skip_mlp, l);
  WriteSublayer(iv, l, skip, b.tmp.data(), w.ln2_g, w.ln2_b, x, T, C, c.ln_eps);
  if (observing) {
    Report(run.observer, "mlp_out", l, pos0, b.tmp.data(), T, C);
    Report(run.observer, "resid_out", l, pos0, x, T, C);
  }
}

// Final LayerNorm and the unembedding. Unless an observer wants every position's logits, only
// the last position's are needed (in row last of x), which saves (T-1) * V * C multiply-adds in
// a prefill.
const float* Session::Unembed(int T_int, int64_t last, const RunOptions& run) {
  const Config& c = model_.config();
  Buffers& b = *buffers_;
  const int64_t T = T_int, C = c.n_embd;
  const float* x = b.x.data();
  if (!run.observer) {
    FinalLogits(x + last * C, 1, b.logits.data());
    return b.logits.data();
  }
  for (int64_t t = 0; t < T; ++t) LayerNorm(x + t * C, model_.ln_f_g, model_.ln_f_b, c.ln_eps, C, b.xn.data() + t * C);
  Report(run.observer, "ln_f", -1, position_, b.xn.data(), T, C);
  if (run.observe_all_logits) {
    b.observed.resize(std::max<size_t>(size_t(T) * c.n_vocab, b.observed.size()));
    ParallelMatMul(b.pool, b.matmul_input, b.xn.data(), T, model_.output, nullptr,
                   b.observed.data(), b.activations);
    Report(run.observer, "logits", -1, position_, b.observed.data(), T, c.n_vocab);
    std::copy_n(b.observed.data() + (T - 1) * c.n_vocab, c.n_vocab, b.logits.data());
  } else {
    ParallelMatMul(b.pool, b.matmul_input, b.xn.data() + (T - 1) * C, 1, model_.output, nullptr,
                   b.logits.data(), b.activations);
  }
  return b.logits.data();
}

void Session::FinalLogits(const float* x, int n, float* logits) {
  const Config& c = model_.config();
  Buffers& b = *buffers_;
  const int64_t C = c.n_embd;
  b.EnsureRows(n);
  for (int64_t t = 0; t < n; ++t) LayerNorm(x + t * C, model_.ln_f_g, model_.ln_f_b, c.ln_eps, C, b.xn.data() + t * C);
  ParallelMatMul(b.pool, b.matmul_input, b.xn.data(), n, model_.output, nullptr, logits,
                 b.activations);
}

}  // namespace gpt2
