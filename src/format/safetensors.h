// Reader for Hugging Face safetensors files (huggingface/safetensors, docs "Format").
//
// Layout accepted:
//   u64 N (little-endian) | N bytes of UTF-8 JSON header | data section (rest of the file)
//   header = { "<tensor name>": {"dtype": "F32", "shape": [d0, d1, ...],
//                                "data_offsets": [begin, end]}, ...,
//              "__metadata__": {"key": "string value", ...} (optional) }
//   offsets are relative to the start of the data section; shapes are row-major (PyTorch order,
//   the last dimension is contiguous).
//
// Checks made before anything is used (each failure is a gpt2::Error naming what is wrong):
//   the file holds the 8-byte length; N <= 100,000,000 (the limit of the reference Rust crate)
//   and 8 + N <= file size; the header is a JSON object (json.h: strict, depth-limited); every
//   tensor entry has exactly a known dtype string, a shape of non-negative integers whose element
//   count does not overflow, and two integer offsets with begin <= end <= data size;
//   end - begin == elements * dtype size; tensors do not overlap; __metadata__ values are
//   strings. Tensor data is never copied: SafetensorsTensor::data points into the caller's
//   buffer, which must outlive the SafetensorsFile.
// Every dtype the format defines is parsed (so a checkpoint with an int64 buffer still loads),
// but ReadAsF32 only converts F32, F16 and BF16 and names the dtype of anything else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpt2 {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;              // as written: "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;     // row-major; empty for a scalar
  const uint8_t* data = nullptr;  // null when only the header was parsed (ParseHeader)
  uint64_t offset = 0;            // of the data in the file: 8 + header length + data_offsets[0]
  size_t nbytes = 0;
  int64_t NumElements() const;
};

class SafetensorsFile {
 public:
  // Throws gpt2::Error. `what` names the file in messages (e.g. its path).
  static std::unique_ptr<SafetensorsFile> Parse(const uint8_t* data, size_t size,
                                                const std::string& what = "safetensors file");
  // The same checks from the file's first bytes only (at least HeaderEnd's), for a reader that
  // fetches each tensor's bytes itself (the page's streamed conversion, by HTTP Range requests):
  // every tensor's data is null and its offset says where it is in the file of file_size bytes.
  static std::unique_ptr<SafetensorsFile> ParseHeader(const uint8_t* prefix, size_t prefix_size,
                                                      uint64_t file_size,
                                                      const std::string& what = "safetensors file");
  // Bytes from the start of the file to the end of the header, from its first 8 (at least) bytes;
  // throws gpt2::Error if the stated length is absurd or past file_size.
  static uint64_t HeaderEnd(const uint8_t* data, size_t size, uint64_t file_size,
                            const std::string& what = "safetensors file");

  // Tensors in header order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  const SafetensorsTensor* Find(const std::string& name) const;  // nullptr when absent

 private:
  static std::unique_ptr<SafetensorsFile> ParseImpl(const uint8_t* data, size_t size,
                                                    uint64_t file_size, bool with_data,
                                                    const std::string& what);
  std::vector<SafetensorsTensor> tensors_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

// Bytes per element of a safetensors dtype string, 0 if the dtype is unknown.
size_t SafetensorsDtypeSize(const std::string& dtype);

// The tensor's values widened to float32 (exact for F16 and BF16). Throws gpt2::Error for any
// other dtype: "tensor 'h.0.attn.c_attn.weight' has dtype I32; expected F32, F16 or BF16".
std::vector<float> ReadAsF32(const SafetensorsTensor& tensor);
// Elements [first, first + n) of the tensor (flat, row-major) widened into out [n], the same
// way; the caller keeps the range inside the tensor.
void ReadAsF32(const SafetensorsTensor& tensor, int64_t first, int64_t n, float* out);

}  // namespace gpt2
