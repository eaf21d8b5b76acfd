#include "model/config.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "base/error.h"
#include "format/gguf.h"
#include "kernels/kernels.h"

#ifndef __EMSCRIPTEN__
#include <unistd.h>
#endif

namespace gpt2 {

namespace {

int PositiveInt(const GgufFile& file, const std::string& key, uint32_t limit) {
  const uint32_t v = file.GetU32(key);
  if (v == 0 || v > limit) {
    throw Error("model metadata '" + key + "' = " + std::to_string(v) + " is out of range (1.." +
                std::to_string(limit) + ")");
  }
  return static_cast<int>(v);
}

}  // namespace

Config Config::FromGguf(const GgufFile& file) {
  const GgufValue* arch = file.Find("general.architecture");
  if (arch == nullptr) throw Error("not a model file: 'general.architecture' is missing");
  if (arch->type != GgufValueType::kString || arch->str != "gpt2") {
    throw Error("model architecture is '" + arch->str + "', but this engine runs only 'gpt2'");
  }
  // Limits far above GPT-2 XL keep later size arithmetic well inside 64 bits.
  Config c;
  c.n_ctx = PositiveInt(file, "gpt2.context_length", 1 << 16);
  c.n_embd = PositiveInt(file, "gpt2.embedding_length", 1 << 14);
  c.n_ff = PositiveInt(file, "gpt2.feed_forward_length", 1 << 16);
  c.n_layer = PositiveInt(file, "gpt2.block_count", 256);
  c.n_head = PositiveInt(file, "gpt2.attention.head_count", 1024);
  c.ln_eps = file.Find("gpt2.attention.layer_norm_epsilon")
                 ? file.GetF32("gpt2.attention.layer_norm_epsilon")
                 : 1e-5f;
  if (!(c.ln_eps > 0.0f && c.ln_eps < 1.0f)) {
    throw Error("model metadata 'gpt2.attention.layer_norm_epsilon' is out of range");
  }
  if (c.n_embd % c.n_head != 0) {
    throw Error("embedding length " + std::to_string(c.n_embd) +
                " is not divisible by the head count " + std::to_string(c.n_head));
  }
  const GgufTensor* embd = file.FindTensor("token_embd.weight");
  if (embd == nullptr) throw Error("model has no tensor 'token_embd.weight'");
  if (embd->n_dims != 2 || embd->ne[0] != c.n_embd || embd->ne[1] > (1 << 22)) {
    throw Error("tensor 'token_embd.weight' should have shape [" + std::to_string(c.n_embd) +
                ", n_vocab]");
  }
  c.n_vocab = static_cast<int>(embd->ne[1]);
  const GgufTensor* qkv = file.FindTensor("blk.0.attn_qkv.weight");
  const TensorType weights = qkv != nullptr ? qkv->type : TensorType::kF32;
  c.kv_cache = weights == TensorType::kF32   ? Config::KvCache::kF32
               : weights == TensorType::kF16 ? Config::KvCache::kF16
                                             : Config::KvCache::kQ8_0;
  return c;
}

int64_t Config::kv8_head_quants() const {
  return int64_t{kv_capacity()} * KvBlocks(head_dim()) * kKvBlock;
}

int64_t Config::kv8_head_scales() const { return int64_t{kv_capacity()} * KvBlocks(head_dim()); }

double Config::kv_bytes_per_value() const {
  switch (kv_cache) {
    case KvCache::kF32:
      return 4;
    case KvCache::kF16:
      return 2;
    case KvCache::kQ8_0:
      break;
  }
  return static_cast<double>(KvBlocks(head_dim()) * (kKvBlock + 2)) / head_dim();
}

const char* Config::kv_cache_name() const {
  switch (kv_cache) {
    case KvCache::kF32:
      return "f32";
    case KvCache::kF16:
      return "f16";
    case KvCache::kQ8_0:
      break;
  }
  return "q8_0";
}

namespace {

// Sizes are element counts times 4 bytes (float and int32 alike). With the limits FromGguf
// enforces the largest product, L * H * n_ctx^2 * 4, is below 2^53: int64 cannot overflow.
class PlanBuilder {
 public:
  explicit PlanBuilder(MemoryPlan& plan) : plan_(plan) {}
  // `count` buffers of `elements` values of `element_bytes` each (f32 unless said), added to
  // `total`.
  void Add(int64_t& total, const char* name, int64_t elements, int64_t count = 1,
           int64_t element_bytes = 4) {
    const int64_t bytes = elements * element_bytes;
    total += bytes * count;
    if (bytes > plan_.largest_buffer_bytes) {
      plan_.largest_buffer_bytes = bytes;
      plan_.largest_buffer_name = name;
    }
  }

 private:
  MemoryPlan& plan_;
};

std::string Megabytes(int64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof(s), "%.0f MB", static_cast<double>(bytes) / (1 << 20));
  return s;
}

}  // namespace

MemoryPlan PlanMemory(const Config& c) {
  const int64_t L = c.n_layer, P = c.n_ctx, C = c.n_embd, H = c.n_head, F = c.n_ff, V = c.n_vocab,
                D = c.head_dim();
  MemoryPlan plan;
  PlanBuilder b(plan);
  // Mirrors Session::Buffers one for one, at their worst case (activations for n_ctx rows: an
  // observed prompt or a re-run of the whole context; a plain prefill needs kPrefillChunk).
  b.Add(plan.session_bytes, "residual stream", P * C, 4);  // x, xn, heads, tmp
  b.Add(plan.session_bytes, "qkv", P * 3 * C);
  b.Add(plan.session_bytes, "MLP hidden", P * F);
  const int64_t nb = KvBlocks(D);
  if (c.kv_cache == Config::KvCache::kQ8_0) {
    b.Add(plan.session_bytes, "KV cache quants", L * H * c.kv8_head_quants(), 2, 1);
    b.Add(plan.session_bytes, "KV cache scales", L * H * c.kv8_head_scales(), 2, 2);
  } else {
    b.Add(plan.session_bytes, "KV cache", L * P * C, 2,
          c.kv_cache == Config::KvCache::kF16 ? 2 : 4);
  }
  b.Add(plan.session_bytes, "attention scratch", H * P, 2);
  b.Add(plan.session_bytes, "logits", V);
  // Session::Prefill with an observer, T = n_keys = n_ctx.
  b.Add(plan.observer_bytes, "observed logits", std::max(H * P * D, P * V));
  b.Add(plan.observer_bytes, "observed attention", H * P * P, 2);
  // CaptureStore::Resize(n_ctx), as an upper bound: the store keeps each block's queries and keys
  // (it recomputes attention rows from them), the stream after attention as 2 statistics a row,
  // and one query's attention row while a view reads it.
  b.Add(plan.capture_bytes, "captured queries", P * C, L);
  if (c.kv_cache == Config::KvCache::kQ8_0) {
    b.Add(plan.capture_bytes, "captured keys", P * H * nb * (kKvBlock + 2), L, 1);
  } else {
    b.Add(plan.capture_bytes, "captured keys", P * C, L,
          c.kv_cache == Config::KvCache::kF16 ? 2 : 4);
  }
  b.Add(plan.capture_bytes, "captured attention row", H * P);
  b.Add(plan.capture_bytes, "captured residuals", P * C, 2 * L + 1);
  b.Add(plan.capture_bytes, "captured MLP activations", P * F, L);
  b.Add(plan.capture_bytes, "captured top tokens", P * 10, 2);
  return plan;
}

Config ReleasedGpt2::config() const {
  Config c;
  c.n_vocab = 50257;
  c.n_ctx = 1024;
  c.n_embd = n_embd;
  c.n_head = n_head;
  c.n_layer = n_layer;
  c.n_ff = 4 * n_embd;
  c.ln_eps = 1e-5f;
  return c;
}

const ReleasedGpt2* FindReleasedGpt2(const char* id) {
  for (const ReleasedGpt2& r : kReleasedGpt2) {
    if (std::string(id) == r.id) return &r;
  }
  return nullptr;
}

const ReleasedGpt2* FindReleasedGpt2(const Config& c) {
  for (const ReleasedGpt2& r : kReleasedGpt2) {
    const Config rc = r.config();
    if (c.n_layer == rc.n_layer && c.n_embd == rc.n_embd && c.n_head == rc.n_head &&
        c.n_ff == rc.n_ff && c.n_vocab == rc.n_vocab && c.n_ctx == rc.n_ctx) {
      return &r;
    }
  }
  return nullptr;
}

int64_t DefaultMemoryBudget() {
#ifdef __EMSCRIPTEN__
  return kWasmMemoryBudget;
#else
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return int64_t{1} << 40;
  return static_cast<int64_t>(pages) * page_size;
#endif
}

void CheckMemoryBudget(const Config& c, uint64_t file_bytes, int64_t budget_bytes) {
  const MemoryPlan plan = PlanMemory(c);
#ifdef __EMSCRIPTEN__
  const std::string where = "this page",
                    limit = "WebAssembly memory is limited to " + Megabytes(budget_bytes);
#else
  const std::string where = "this machine", limit = "its memory is " + Megabytes(budget_bytes);
#endif
  const std::string shape =
      " (" + std::to_string(c.n_layer) + (c.n_layer == 1 ? " layer" : " layers") + ", context " +
      std::to_string(c.n_ctx) + ", embedding " + std::to_string(c.n_embd) + ", feed-forward " +
      std::to_string(c.n_ff) + ", vocabulary " + std::to_string(c.n_vocab) + ")";
  if (file_bytes > static_cast<uint64_t>(budget_bytes) ||
      plan.session_bytes > budget_bytes - static_cast<int64_t>(file_bytes)) {
    throw Error("This model is too large for " + where + shape + ": running it needs " +
                Megabytes(plan.session_bytes) + " of working memory besides the " +
                Megabytes(static_cast<int64_t>(file_bytes)) + " file, but " + limit + ".");
  }
  if (plan.largest_buffer_bytes > budget_bytes) {
    throw Error("This model is too large for " + where + shape + ": its " +
                plan.largest_buffer_name + " at full context would need " +
                Megabytes(plan.largest_buffer_bytes) + ", but " + limit + ".");
  }
}

}  // namespace gpt2
