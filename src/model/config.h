// GPT-2 hyperparameters, read from the GGUF metadata llama.cpp writes for architecture "gpt2".
#pragma once

#include <cstdint>

namespace gpt2 {

class GgufFile;

struct Config {
  int n_vocab = 0;   // rows of token_embd (50257 for GPT-2)
  int n_ctx = 0;     // gpt2.context_length (1024)
  int n_embd = 0;    // gpt2.embedding_length (768)
  int n_head = 0;    // gpt2.attention.head_count (12)
  int n_layer = 0;   // gpt2.block_count (12)
  int n_ff = 0;      // gpt2.feed_forward_length (3072)
  float ln_eps = 1e-5f;  // gpt2.attention.layer_norm_epsilon
  int head_dim() const { return n_embd / n_head; }

  // Reads and validates the config (architecture must be "gpt2", sizes positive and
  // consistent, n_embd divisible by n_head). n_vocab comes from token_embd's shape.
  static Config FromGguf(const GgufFile& file);  // throws gpt2::Error
};

constexpr int kEndOfText = 50256;  // GPT-2's <|endoftext|>

}  // namespace gpt2
