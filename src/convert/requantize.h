// A GPT-2 GGUF re-encoded with another matrix type (F32/F16 to Q8_0 or Q4_0, say): every tensor
// decoded to f32 (format/quant.h DequantizeRow) and stored as the converter stores it
// (gpt2_gguf.h Gpt2TensorStorageType: 2-D weights take the type, norms, biases and the position
// embedding stay F32), with the converter's metadata (AddGpt2Metadata: the source's shape,
// tokenizer and general.name, general.file_type of the new type). The same code serves
// `gpt2-convert --input FILE.gguf` and the page's quantization lens, one tensor per call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/tensor_type.h"
#include "model/config.h"

namespace gpt2 {

class Tokenizer;

class GgufRequantizeInMemory {
 public:
  // Reads the source's config and tokenizer (if it has one) and lays out the output; throws
  // gpt2::Error for a file that is not a GPT-2 GGUF or an output above max_bytes. `source` (and
  // its bytes) must outlive this object.
  GgufRequantizeInMemory(const GgufFile& source, TensorType matrix_type, uint64_t max_bytes);
  ~GgufRequantizeInMemory();
  GgufRequantizeInMemory(const GgufRequantizeInMemory&) = delete;
  GgufRequantizeInMemory& operator=(const GgufRequantizeInMemory&) = delete;

  int num_tensors() const { return static_cast<int>(source_tensors_.size()); }
  uint64_t size() const { return layout_.size; }
  int done() const { return done_; }
  // Encodes the next tensor (none left: nothing); returns the tensors done so far.
  int ConvertNext();
  // The GGUF file, size() bytes; throws unless every tensor was converted.
  const uint8_t* output() const;
  // Hands the output over (the caller owns it; this object keeps nothing).
  std::vector<uint8_t> TakeOutput();

 private:
  std::vector<const GgufTensor*> source_tensors_;
  std::vector<TensorType> types_;
  GgufWriter::Layout layout_;
  std::vector<uint8_t> output_;
  int done_ = 0;
};

// The whole file at once, written atomically to output_path. Throws gpt2::Error.
void RequantizeGgufFile(const std::string& input_path, const std::string& output_path,
                        TensorType matrix_type);

}  // namespace gpt2
