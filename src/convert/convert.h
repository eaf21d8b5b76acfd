// Hugging Face GPT-2 checkpoint -> llama.cpp GGUF, as a library so tests call it directly
// (src/tools/convert_main.cc is the command-line front end).
//
// Mirrors llama.cpp convert_hf_to_gguf.py GPT2Model:
//   * names: "transformer." prefixes are dropped, so both transformer.h.N.* and h.N.* load;
//     wte -> token_embd, wpe -> position_embd, ln_f -> output_norm, h.N.ln_1 -> blk.N.attn_norm,
//     attn.c_attn -> attn_qkv (already the fused q|k|v projection, kept fused), attn.c_proj ->
//     attn_output, ln_2 -> ffn_norm, mlp.c_fc -> ffn_up, mlp.c_proj -> ffn_down, lm_head -> output;
//   * the causal-mask buffers h.N.attn.bias and h.N.attn.masked_bias are skipped;
//   * Conv1D weights are stored [in, out] by Hugging Face and are transposed to ggml's
//     [out rows, in columns] (ne = {in, out});
//   * lm_head.weight, when present, is dropped if it equals wte bit for bit (GPT-2 ties them and
//     llama.cpp then reuses token_embd), otherwise written as output.weight;
//   * storage types follow gpt2_gguf.h Gpt2TensorStorageType.
// Every tensor's presence, shape (from config.json) and dtype (F32, F16, BF16) is checked; any
// other tensor is an error, as in the Python converter ("Can not map tensor").
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/tensor_type.h"
#include "model/config.h"

namespace gpt2 {

class SafetensorsFile;
struct SafetensorsTensor;
class Tokenizer;

// "f32", "f16", "q8_0", "q4_0" -> type. Throws gpt2::Error naming the accepted values.
TensorType ParseConvertType(const std::string& name);

// Hyperparameters from a Hugging Face GPT-2 config.json: n_layer, n_head, n_embd,
// n_positions (or n_ctx), n_inner (null means 4 * n_embd), layer_norm_epsilon, vocab_size.
// Rejects configs whose math our engine and llama.cpp's GPT-2 graph do not implement
// (activation other than gelu_new, scale_attn_by_inverse_layer_idx, ...). Throws gpt2::Error.
Config ConfigFromHfJson(const std::string& json_text);

// The name the converter writes as general.name when none is given: "GPT-2 small", "medium",
// "large" or "xl" for the shapes OpenAI released (layers, width, heads, vocabulary, context),
// "" (no general.name) for any other shape.
std::string Gpt2DefaultModelName(const Config& config);

struct ConvertStats {
  int tensors_written = 0;
  int tensors_skipped = 0;   // attention mask buffers
  bool lm_head_tied = true;  // no output.weight written
};

// Adds metadata and every tensor of `checkpoint` to `writer`. `log` (may be null) gets one line
// per tensor written. Throws gpt2::Error.
ConvertStats BuildGpt2Gguf(const SafetensorsFile& checkpoint, const Config& config,
                           const Tokenizer* tokenizer, TensorType matrix_type, GgufWriter* writer,
                           std::ostream* log, const std::string& model_name = "");

// The same conversion one tensor at a time, for callers that cannot hold the output twice (the
// page converts GPT-2 small inside a WebAssembly heap): the constructor makes every check
// BuildGpt2Gguf makes and fixes the output file's layout; EncodeTensor(i) then writes tensor i
// (with its padding) into `file`, the caller's buffer of layout().size bytes, at its offset.
// Both produce the same bytes. `checkpoint` and `tokenizer` must outlive this object.
class Gpt2GgufConversion {
 public:
  // lm_head_tied: whether lm_head.weight (when the checkpoint has one) equals wte, when the
  // caller found out itself (the checkpoint's data is not in memory); null: compared here.
  Gpt2GgufConversion(const SafetensorsFile& checkpoint, const Config& config,
                     const Tokenizer* tokenizer, TensorType matrix_type,
                     const std::string& model_name, const bool* lm_head_tied = nullptr);

  const GgufWriter::Layout& layout() const { return layout_; }
  const ConvertStats& stats() const { return stats_; }
  int num_tensors() const { return static_cast<int>(tensors_.size()); }
  // Copies the header (with the padding before the data section) to file[0..).
  void WriteHeader(uint8_t* file) const;
  // Throws gpt2::Error (e.g. an F64 tensor ReadAsF32 cannot widen).
  void EncodeTensor(int i, uint8_t* file, std::ostream* log) const;
  // The same for rows [first_row, first_row + n_rows) of tensor i (ggml rows: for a matrix not
  // transposed, the checkpoint's rows too), whose checkpoint bytes are `source`; a transposed
  // (Conv1D) tensor only whole. The last piece writes the padding after the tensor.
  void EncodeRows(int i, int64_t first_row, int64_t n_rows, const uint8_t* source,
                  uint8_t* file) const;
  int64_t rows(int i) const;

  // One output tensor: where its values come from and how they are stored.
  struct Planned {
    std::string gguf_name;
    const SafetensorsTensor* source = nullptr;
    bool conv1d = false;      // stored [in, out]: transposed while encoding
    std::vector<int64_t> ne;  // ggml order, after the transpose
    TensorType type = TensorType::kF32;
  };

  const Planned& planned(int i) const { return tensors_.at(i); }

 private:
  void CheckIndex(int i) const;
  std::vector<Planned> tensors_;
  ConvertStats stats_;
  GgufWriter::Layout layout_;
};

// A whole conversion into memory, one tensor per call so a caller can report progress in between
// (the page converts GPT-2 small in its worker): the output is one buffer of layout().size bytes,
// at most max_bytes (gpt2::Error otherwise, or when it cannot be allocated). `checkpoint`'s bytes
// and `tokenizer` must outlive this object.
class Gpt2GgufInMemory {
 public:
  Gpt2GgufInMemory(const SafetensorsFile& checkpoint, const Config& config,
                   const Tokenizer* tokenizer, TensorType matrix_type,
                   const std::string& model_name, uint64_t max_bytes);
  ~Gpt2GgufInMemory();
  Gpt2GgufInMemory(const Gpt2GgufInMemory&) = delete;
  Gpt2GgufInMemory& operator=(const Gpt2GgufInMemory&) = delete;

  int num_tensors() const { return conversion_.num_tensors(); }
  uint64_t size() const { return conversion_.layout().size; }
  int done() const { return done_; }
  // Encodes the next tensor (none left: nothing); returns the tensors done so far.
  int ConvertNext();
  // The GGUF file, size() bytes; throws unless every tensor was converted.
  const uint8_t* output() const;

 private:
  Gpt2GgufConversion conversion_;
  uint8_t* output_ = nullptr;
  int done_ = 0;
};

// The conversion of a checkpoint that is never held whole (the page converts GPT-2 medium, large
// and XL from Hugging Face with HTTP Range requests): made from the safetensors header alone, it
// asks for the file one piece at a time (next()), encodes each piece fed into the output and keeps
// nothing of it. The pieces: when the checkpoint has lm_head.weight, first lm_head and wte side by
// side (equal: tied and dropped, as BuildGpt2Gguf does); then every tensor, a matrix stored as
// ggml stores it in whole rows of at most kPieceBytes, any other tensor whole, in the order they
// are in the file, so a reader can take them from one sequential read.
// The output (one buffer of output_size() bytes, at most max_bytes) is allocated once the tie is
// known. The bytes equal ConvertHfGpt2's of the same file.
class Gpt2GgufStream {
 public:
  static constexpr uint64_t kPieceBytes = uint64_t{32} << 20;
  struct Range {
    uint64_t offset = 0;  // in the safetensors file
    uint64_t bytes = 0;
  };
  // prefix: the file's first bytes, at least SafetensorsFile::HeaderEnd of them. Makes every check
  // the conversion makes. `tokenizer` must outlive this object. Throws gpt2::Error.
  // piece_bytes: the largest piece (tests make it small).
  Gpt2GgufStream(const uint8_t* prefix, size_t prefix_size, uint64_t file_size,
                 const Config& config, const Tokenizer* tokenizer, TensorType matrix_type,
                 const std::string& model_name, uint64_t max_bytes,
                 uint64_t piece_bytes = kPieceBytes);
  ~Gpt2GgufStream();
  Gpt2GgufStream(const Gpt2GgufStream&) = delete;
  Gpt2GgufStream& operator=(const Gpt2GgufStream&) = delete;

  bool done() const;
  Range next() const;  // the piece Feed takes next; {0, 0} when done
  // bytes: exactly next().bytes of the file from next().offset. Throws gpt2::Error (a piece of
  // another length, a dtype ReadAsF32 cannot widen, no memory for the output).
  void Feed(const uint8_t* bytes, uint64_t n);
  // 0 until the tie is known (the first tensor's piece is next), then the output's size.
  uint64_t output_size() const;
  int num_tensors() const { return plan_->num_tensors(); }
  int tensors_done() const { return tensors_done_; }
  uint64_t source_bytes() const { return total_; }  // every piece's bytes together
  uint64_t fed_bytes() const { return fed_; }
  const uint8_t* output() const;  // the GGUF file; throws unless done()

 private:
  void Begin();  // plans the output once the tie is known
  std::unique_ptr<SafetensorsFile> header_;
  Config config_;
  const Tokenizer* tokenizer_;
  TensorType type_;
  std::string name_;
  uint64_t max_bytes_;
  uint64_t piece_bytes_;
  std::unique_ptr<Gpt2GgufConversion> plan_;  // tied until the check says otherwise
  const SafetensorsTensor* lm_head_ = nullptr;
  const SafetensorsTensor* wte_ = nullptr;
  // The tie check: elements of lm_head compared so far, and the lm_head piece waiting for wte's.
  uint64_t tie_elements_ = 0;
  std::vector<uint8_t> lm_head_piece_;
  bool tie_known_ = true;
  bool tied_ = true;
  uint8_t* output_ = nullptr;
  // Every tensor's pieces, by their place in the file; rows_left_ per tensor counts down.
  struct Piece {
    int tensor;
    int64_t first_row, n_rows;
    Range range;
  };
  std::vector<Piece> pieces_;
  size_t piece_ = 0;
  std::vector<int64_t> rows_left_;
  int tensors_done_ = 0;
  uint64_t fed_ = 0, total_ = 0;
};

// Reads `input_dir`/config.json, model.safetensors and the vocabulary (vocab.json + merges.txt,
// or encoder.json + vocab.bpe) and writes `output_path` atomically. general.name is
// `model_name`, or Gpt2DefaultModelName when that is empty. Throws gpt2::Error.
ConvertStats ConvertHfGpt2(const std::string& input_dir, const std::string& output_path,
                           TensorType matrix_type, std::ostream* log,
                           const std::string& model_name = "");

}  // namespace gpt2
