// GPT-2 hyperparameters, read from the GGUF metadata llama.cpp writes for architecture "gpt2".
#pragma once

#include <cmath>
#include <cstdint>

#include "base/memory_limit.h"

namespace gpt2 {

class GgufFile;

struct Config {
  int n_vocab = 0;       // rows of token_embd (50257 for GPT-2)
  int n_ctx = 0;         // gpt2.context_length (1024)
  int n_embd = 0;        // gpt2.embedding_length (768)
  int n_head = 0;        // gpt2.attention.head_count (12)
  int n_layer = 0;       // gpt2.block_count (12)
  int n_ff = 0;          // gpt2.feed_forward_length (3072)
  float ln_eps = 1e-5f;  // gpt2.attention.layer_norm_epsilon
  // The number format of the KV cache (and of the capture store's keys), set by FromGguf from the
  // block weights' type: an F32 model keeps f32 (as close to PyTorch as its weights), an F16
  // model f16 (llama.cpp's default cache: 11 significant bits; beyond +-65504 saturates, see
  // kernels.h F32ToF16Saturated), a Q8_0 or Q4_0 model 8 bits (kernels.h "The 8-bit KV cache":
  // ggml's Q8_0 rounding, llama.cpp's q8_0 cache, no coarser than the int8 activations every
  // matmul of such a model already multiplies). A token at position p reads the whole cache, so
  // its bytes (GPT-2 small at 1000 positions: 73.7 MB f32, 36.9 f16, 19.6 8-bit) bound decoding
  // at long positions.
  enum class KvCache { kF32, kF16, kQ8_0 };
  KvCache kv_cache = KvCache::kF32;
  // Positions the cache has room for: n_ctx rounded up to even (the 8-bit cache keeps values in
  // pairs of positions).
  int kv_capacity() const { return (n_ctx + 1) / 2 * 2; }
  // The 8-bit cache's quants and f16 scales per head, keys or values (kernels.h KvHeadQ8).
  int64_t kv8_head_quants() const;
  int64_t kv8_head_scales() const;
  // Bytes the cache holds per key or value number: 4, 2, or an 8-bit row's quants and scales
  // over head_dim (1.0625 for GPT-2's head_dim 64).
  double kv_bytes_per_value() const;
  const char* kv_cache_name() const;  // "f32", "f16", "q8_0"
  int head_dim() const { return n_embd / n_head; }
  // Attention scores are scale * dot(q, k) (Hugging Face GPT2Attention: / sqrt(head_dim)); one
  // expression for the forward pass and the capture store, which recomputes its probabilities.
  float attn_scale() const { return 1.0f / std::sqrt(static_cast<float>(head_dim())); }

  // Reads and validates the config (architecture must be "gpt2", sizes positive and
  // consistent, n_embd divisible by n_head). n_vocab comes from token_embd's shape.
  static Config FromGguf(const GgufFile& file);  // throws gpt2::Error
};

constexpr int kEndOfText = 50256;  // GPT-2's <|endoftext|>

// The four sizes OpenAI released (openai-community/gpt2, gpt2-medium, gpt2-large, gpt2-xl on
// Hugging Face); each has n_ff = 4 * n_embd, n_vocab 50257, n_ctx 1024.
struct ReleasedGpt2 {
  const char* id;    // "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl": the Hub repository's name
  const char* name;  // "GPT-2 small", ...: the GGUF general.name the converter writes
  int n_layer, n_embd, n_head;
  Config config() const;
};
constexpr ReleasedGpt2 kReleasedGpt2[] = {{"gpt2", "GPT-2 small", 12, 768, 12},
                                          {"gpt2-medium", "GPT-2 medium", 24, 1024, 16},
                                          {"gpt2-large", "GPT-2 large", 36, 1280, 20},
                                          {"gpt2-xl", "GPT-2 XL", 48, 1600, 25}};
// The released size with this id, or with exactly this config's sizes; nullptr if none.
const ReleasedGpt2* FindReleasedGpt2(const char* id);
const ReleasedGpt2* FindReleasedGpt2(const Config& config);

// Bytes of every buffer whose size derives from the config, computed in 64 bits. In the
// WebAssembly build size_t is 32 bits: an expression like size_t(n_ctx) * n_ff there wraps past
// 2^32 into a tiny allocation that later writes overrun. A model is only accepted once these
// figures fit the memory budget (CheckMemoryBudget), which also bounds every size_t product
// the session and the bindings form from the same config values.
struct MemoryPlan {
  // Session (src/model/session.cc), allocated up front for the full context: activations
  // [n_ctx, C|3C|F], the KV cache [2, L, n_ctx, C] (f32, f16 or 8-bit rows with their scales),
  // attention scratch [2, H, n_ctx], logits [V].
  int64_t session_bytes = 0;
  // Extra while an observer watches a full-context prefill: per-head q/k/v or all logits
  // (max(H*n_ctx*D, n_ctx*V)) and the attention scores and probabilities [2, H, n_ctx, n_ctx].
  int64_t observer_bytes = 0;
  // The page's capture store at full context (src/model/capture.h CaptureStore): per block
  // queries [n_ctx, C], keys [n_ctx, C] (as the KV cache stores them), residuals and MLP
  // activations, plus top-10s.
  int64_t capture_bytes = 0;
  // The largest single buffer of all the above (each is one std::vector).
  int64_t largest_buffer_bytes = 0;
  const char* largest_buffer_name = "";
};
MemoryPlan PlanMemory(const Config& config);

// Bytes a model may use here: in WebAssembly kWasmMemoryBudget (base/memory_limit.h); natively
// the machine's physical memory.
int64_t DefaultMemoryBudget();

// Throws gpt2::Error ("... too large for this page ...") unless the file plus the session fit in
// budget_bytes and no single buffer (capture and observer ones included) exceeds it.
void CheckMemoryBudget(const Config& config, uint64_t file_bytes, int64_t budget_bytes);

}  // namespace gpt2
