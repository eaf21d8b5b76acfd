// The GGUF metadata, tensor names and per-tensor storage types llama.cpp uses for GPT-2, in one
// place for every writer (the converter and the synthetic-model maker).
//
// Reference: llama.cpp convert_hf_to_gguf.py (GPT2Model.set_gguf_parameters, TextModel
// prepare_tensors and _set_vocab_gpt2), gguf-py/gguf/constants.py (Keys, MODEL_TENSOR names for
// MODEL_ARCH.GPT2) and src/llama-model.cpp (LLM_ARCH_GPT2 loads token_embd, position_embd,
// output_norm, optional output, and per block attn_norm, attn_qkv, attn_output, ffn_norm,
// ffn_up, ffn_down, each with .weight and .bias).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/tensor_type.h"
#include "model/config.h"

namespace gpt2 {

class GgufWriter;
class Tokenizer;

// llama.h enum llama_ftype values stored in general.file_type.
constexpr uint32_t kLlamaFtypeAllF32 = 0;
constexpr uint32_t kLlamaFtypeMostlyF16 = 1;
constexpr uint32_t kLlamaFtypeMostlyQ4_0 = 2;
constexpr uint32_t kLlamaFtypeMostlyQ8_0 = 7;

// general.file_type for files whose matrices are `matrix_type`.
uint32_t LlamaFileType(TensorType matrix_type);

// Writes, in this order: general.architecture "gpt2", general.name (if non-empty),
// gpt2.context_length, gpt2.embedding_length, gpt2.feed_forward_length, gpt2.block_count,
// gpt2.attention.head_count, gpt2.attention.layer_norm_epsilon, general.file_type,
// general.quantization_version (2, ggml's GGML_QNT_VERSION, as gguf-py always writes), and with
// a tokenizer: tokenizer.ggml.model "gpt2", tokenizer.ggml.pre "gpt-2", tokenizer.ggml.tokens,
// tokenizer.ggml.token_type (1 normal; 3 control for "<|endoftext|>", which Hugging Face lists
// as a special added token), tokenizer.ggml.merges, tokenizer.ggml.bos_token_id and
// eos_token_id (both <|endoftext|>, from GPT-2's config.json). config.n_vocab must equal the
// tokenizer's size. Throws gpt2::Error.
void AddGpt2Metadata(GgufWriter& writer, const Config& config, const Tokenizer* tokenizer,
                     uint32_t file_type, const std::string& model_name = "");

// GGUF tensor names (gguf-py MODEL_TENSOR names for GPT2).
std::string Gpt2BlockTensorName(int layer, const char* part);  // ("attn_qkv") -> "blk.N.attn_qkv"

// The type llama.cpp's converter gives a tensor when the requested type is `matrix_type`:
// 1-D tensors, *_norm.weight, biases and position_embd stay F32 (prepare_tensors: "Most of the
// codebase that takes in 1D tensors or norms only handles F32 tensors", POS_EMBD is in its
// always-F32 list); every other 2-D weight, token_embd included, takes `matrix_type`, except
// that a row length (ne[0]) not a multiple of 32 cannot be block-quantized and falls back to F16
// (gguf.can_quantize_to_q8_0 in the converter).
TensorType Gpt2TensorStorageType(const std::string& gguf_name, int n_dims, int64_t ne0,
                                 TensorType matrix_type);

// Encodes row-major float32 values [rows, cols] as `type` (ggml rows of `cols` elements; cols
// must be a multiple of the type's block size). F16 rounds to nearest even, Q8_0/Q4_0 use ggml's
// reference quantization (format/quant.h).
std::vector<uint8_t> EncodeRows(const float* x, int64_t rows, int64_t cols, TensorType type);
// The same into `out`, which holds rows * RowBytes(type, cols) bytes.
void EncodeRowsInto(const float* x, int64_t rows, int64_t cols, TensorType type, uint8_t* out);

}  // namespace gpt2
