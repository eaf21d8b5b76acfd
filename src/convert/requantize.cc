#include "convert/requantize.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "convert/gpt2_gguf.h"
#include "format/quant.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

GgufRequantizeInMemory::GgufRequantizeInMemory(const GgufFile& source, TensorType matrix_type,
                                               uint64_t max_bytes) {
  const Config config = Config::FromGguf(source);
  // Files without a vocabulary (the tests' synthetic models) stay without one.
  std::unique_ptr<Tokenizer> tokenizer;
  if (source.Find("tokenizer.ggml.tokens") != nullptr) tokenizer = Tokenizer::FromGguf(source);
  const GgufValue* name = source.Find("general.name");
  GgufWriter writer;
  AddGpt2Metadata(
      writer, config, tokenizer.get(), LlamaFileType(matrix_type),
      name != nullptr && name->type == GgufValueType::kString ? name->str : std::string());
  for (const GgufTensor& t : source.tensors()) {
    const TensorType type = Gpt2TensorStorageType(t.name, t.n_dims, t.ne[0], matrix_type);
    writer.AddTensorInfo(t.name, type, std::vector<int64_t>(t.ne, t.ne + std::max(1, t.n_dims)));
    source_tensors_.push_back(&t);
    types_.push_back(type);
  }
  layout_ = writer.MakeLayout();
  if (layout_.size > max_bytes) {
    throw Error("The re-encoded model would take " + std::to_string(layout_.size) +
                " bytes, more than the " + std::to_string(max_bytes) + " allowed.");
  }
  output_.assign(layout_.size, 0);
  std::copy(layout_.header.begin(), layout_.header.end(), output_.begin());
}

GgufRequantizeInMemory::~GgufRequantizeInMemory() = default;

int GgufRequantizeInMemory::ConvertNext() {
  if (done_ >= num_tensors()) return done_;
  if (output_.size() != layout_.size) throw Error("The re-encoded model was already handed over.");
  const GgufTensor& t = *source_tensors_[done_];
  const TensorType type = types_[done_];
  const int64_t cols = t.ne[0], rows = t.NumElements() / cols;
  const size_t in_row = RowBytes(t.type, cols), out_row = RowBytes(type, cols);
  uint8_t* out = output_.data() + layout_.offsets[done_];
  // A few rows at a time: GPT-2's token embedding is 154 MB as f32.
  constexpr int64_t kRows = 64;
  std::vector<float> x(size_t(std::min(rows, kRows)) * cols);
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const int64_t n = std::min(kRows, rows - r0);
    for (int64_t r = 0; r < n; ++r)
      DequantizeRow(t.type, t.data + (r0 + r) * in_row, x.data() + r * cols, cols);
    EncodeRowsInto(x.data(), n, cols, type, out + r0 * out_row);
  }
  return ++done_;
}

const uint8_t* GgufRequantizeInMemory::output() const {
  if (done_ < num_tensors() || output_.size() != layout_.size)
    throw Error("The re-encoded model is not complete.");
  return output_.data();
}

std::vector<uint8_t> GgufRequantizeInMemory::TakeOutput() {
  output();  // complete?
  return std::move(output_);
}

void RequantizeGgufFile(const std::string& input_path, const std::string& output_path,
                        TensorType matrix_type) {
  const std::unique_ptr<MappedFile> mapping = MappedFile::Open(input_path);
  const std::unique_ptr<GgufFile> source = GgufFile::Parse(mapping->data(), mapping->size());
  GgufRequantizeInMemory job(*source, matrix_type, UINT64_MAX);
  while (job.ConvertNext() < job.num_tensors()) {
  }
  const std::vector<uint8_t> bytes = job.TakeOutput();
  const std::string tmp = output_path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw Error("cannot write '" + output_path + "'");
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), output_path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("cannot write '" + output_path + "'");
  }
}

}  // namespace gpt2
