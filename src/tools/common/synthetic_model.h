// Deterministic GPT-2-architecture models for tests and benchmarks (no real weights needed).
//
// Every value is a pure function of (seed, tensor name, element index), so scripts/make_golden.py
// (numpy + PyTorch) rebuilds exactly the same float32 weights and computes golden outputs with
// an implementation we did not write. The formula, for element i (ggml storage order) of the
// tensor named `name`:
//   key   = fnv1a64(name) ^ seed                       (FNV-1a 64-bit over the name's bytes)
//   z     = splitmix64_mix(key + (i + 1) * 0x9E3779B97F4A7C15)   (mod 2^64)
//   u     = (z >> 40) * 2^-23 - 1                       (exact in float32, in [-1, 1))
//   value = float32(double(scale) * u + double(offset))
// splitmix64_mix(z): z = (z ^ z>>30) * 0xBF58476D1CE4E5B9; z = (z ^ z>>27) * 0x94D049BB133111EB;
//                    return z ^ z>>31.
// (scale, offset) by tensor (C = n_embd, F = n_ff):
//   token_embd.weight (0.5, 0)       position_embd.weight (0.3, 0)
//   *norm.weight      (0.2, 1)       *norm.bias            (0.1, 0)
//   blk.N.attn_qkv.weight, blk.N.attn_output.weight, blk.N.ffn_up.weight: (1.5/sqrt(C), 0)
//   blk.N.ffn_down.weight (1.5/sqrt(F), 0)
//   every other *.bias (0.1, 0)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/tensor_type.h"
#include "model/config.h"

namespace gpt2 {

class Tokenizer;

constexpr uint64_t kSyntheticSeed = 0x5EED;

// The float32 values of one tensor, by the formula above. This form infers C (and F = 4C) from
// the element count of the matrices; the Config form takes them from the config.
std::vector<float> SyntheticTensor(const std::string& name, int64_t n_elements, uint64_t seed);
std::vector<float> SyntheticTensor(const std::string& name, int64_t n_elements,
                                   const Config& config, uint64_t seed = kSyntheticSeed);

// Writes a GGUF for `config` with matrices (attn_qkv, attn_output, ffn_up, ffn_down and
// token_embd) stored as `matrix_type`; norms, biases and position_embd stay F32.
// With a tokenizer, its vocabulary and merges go into the file (config.n_vocab must equal its
// size); without, the file has no tokenizer. Atomic write. Throws gpt2::Error.
void WriteSyntheticModel(const std::string& path, const Config& config, TensorType matrix_type,
                         const Tokenizer* tokenizer, uint64_t seed = kSyntheticSeed);

// The same file in memory.
std::vector<uint8_t> SyntheticModelBytes(const Config& config, TensorType matrix_type,
                                         const Tokenizer* tokenizer,
                                         uint64_t seed = kSyntheticSeed);

// GPT-2 small's shape (124M) and the small shape the golden tests use.
Config Gpt2SmallConfig();
Config TinyTestConfig();  // n_vocab 50257, n_ctx 64, n_embd 64, n_head 4, n_layer 2, n_ff 256

}  // namespace gpt2
