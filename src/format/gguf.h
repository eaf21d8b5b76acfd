// GGUF reader and writer (the llama.cpp model file format, versions 2 and 3).
//
// Layout accepted (all little-endian; ggml/docs/gguf.md):
//   u32 magic "GGUF" | u32 version (2 or 3) | u64 n_tensors | u64 n_kv
//   n_kv x { string key | u32 value_type | value }
//   n_tensors x { string name | u32 n_dims (1..4) | u64 ne[n_dims] | u32 ggml_type | u64 offset }
//   padding to `general.alignment` (u32 key, default 32)
//   tensor data; tensor i starts at data_start + offset_i
//   string = u64 length + bytes (no terminator). value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32,
//   5 i32, 6 f32, 7 bool, 8 string, 9 array (u32 elem_type, u64 count, elems), 10 u64, 11 i64,
//   12 f64.
//
// Checks made before anything is used (each failure is a gpt2::Error naming what is wrong):
//   every read stays inside the buffer; counts are bounded by the bytes that remain (so an absurd
//   n_tensors or string length fails before any allocation); keys and tensor names are unique;
//   alignment is a power of two; n_dims in 1..4, each ne >= 1, element count does not overflow;
//   the tensor type is F32, F16, Q8_0 or Q4_0 (others are named: "tensor 'x' has type q4_K");
//   ne[0] is a multiple of the type's block size; each offset is a multiple of the alignment and
//   offset + size lies inside the file; bools are 0 or 1; arrays hold at most 2^24 elements.
//   Neither tensor data nor arrays are copied: GgufTensor::data points into the caller's buffer,
//   which must outlive the GgufFile, and an array's elements are checked when parsed but read
//   from that buffer only when asked for (GetArray, GetStringArray): expanded for the file's
//   life, GPT-2's three vocabulary arrays would hold ~8 MB of the page's heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/tensor_type.h"

namespace gpt2 {

enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

struct GgufValue {
  GgufValueType type = GgufValueType::kU32;
  // Scalars are widened into one of these, by the type's signedness/kind.
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string str;  // kString
  // kArray of scalars or strings (nested arrays are rejected):
  GgufValueType array_type = GgufValueType::kU8;
  uint64_t array_count = 0;
  uint64_t array_offset = 0;     // parsed: where the first element starts in the file
  std::vector<GgufValue> array;  // built for GgufWriter: the elements (parsed: empty, see GetArray)
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufTensor {
  std::string name;
  TensorType type = TensorType::kF32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};   // ggml order: ne[0] is the contiguous dimension
  uint64_t offset = 0;            // from the start of the data section
  const uint8_t* data = nullptr;  // into the caller's buffer
  size_t nbytes = 0;
  int64_t NumElements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class GgufFile {
 public:
  // Parses the whole header and validates every tensor's extent. Throws gpt2::Error.
  static std::unique_ptr<GgufFile> Parse(const uint8_t* data, size_t size);

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t size() const { return size_; }  // bytes of the buffer parsed (the whole file)
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  // nullptr when absent.
  const GgufValue* Find(const std::string& key) const;
  const GgufTensor* FindTensor(const std::string& name) const;

  // Typed getters: throw gpt2::Error if the key is missing or of an incompatible type
  // (any integer type is accepted for the integer getters if the value fits).
  uint32_t GetU32(const std::string& key) const;
  float GetF32(const std::string& key) const;  // also accepts f64
  std::string GetString(const std::string& key) const;
  std::vector<std::string> GetStringArray(const std::string& key) const;
  // The elements of an array value, read from the file's buffer (also for arrays of strings).
  std::vector<GgufValue> GetArray(const std::string& key) const;

 private:
  const uint8_t* data_ = nullptr;  // the caller's buffer
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t size_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::vector<GgufTensor> tensors_;
};

// Writes the file through `path`.tmp and a rename, so a failed write never leaves a partial file
// under the final name. Throws gpt2::Error on I/O failure.
void WriteFileAtomically(const std::string& path, const uint8_t* data, uint64_t size);

// Builds a GGUF v3 file in memory. Used by the converter, the test-model maker and tests.
class GgufWriter {
 public:
  void AddU32(const std::string& key, uint32_t v);
  void AddI32(const std::string& key, int32_t v);
  void AddF32(const std::string& key, float v);
  void AddBool(const std::string& key, bool v);
  void AddString(const std::string& key, const std::string& v);
  void AddStringArray(const std::string& key, const std::vector<std::string>& v);
  void AddI32Array(const std::string& key, const std::vector<int32_t>& v);
  // ne in ggml order (ne[0] contiguous). data holds RowBytes(type, ne[0]) * rows bytes; copied.
  void AddTensor(const std::string& name, TensorType type, const std::vector<int64_t>& ne,
                 const void* data, size_t nbytes);
  // A tensor whose data the caller writes itself, at Layout().offsets[i] of the file: lets a
  // converter encode one tensor at a time straight into the output (no second copy of it).
  void AddTensorInfo(const std::string& name, TensorType type, const std::vector<int64_t>& ne);

  // Where everything goes in the file Serialize would write: the header (up to and including
  // the padding before the data section), each tensor's absolute offset and byte count in
  // AddTensor order, and the total size (each tensor padded to the alignment; padding is zeros).
  struct Layout {
    std::vector<uint8_t> header;
    std::vector<uint64_t> offsets;
    std::vector<uint64_t> nbytes;
    uint64_t size = 0;
  };
  Layout MakeLayout(uint32_t alignment = 32) const;

  // Throws if a tensor was added with AddTensorInfo (it has no data here).
  std::vector<uint8_t> Serialize(uint32_t alignment = 32) const;
  // Writes to path + ".tmp" and renames, so an interrupted run never leaves a partial file under
  // the final name. Throws gpt2::Error on I/O failure.
  void WriteFile(const std::string& path, uint32_t alignment = 32) const;

 private:
  struct PendingTensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> ne;
    uint64_t nbytes = 0;
    bool has_data = false;
    std::vector<uint8_t> bytes;
  };
  // Checks name, type and shape; returns the data size the shape and type need.
  uint64_t CheckTensor(const std::string& name, TensorType type,
                       const std::vector<int64_t>& ne) const;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

// A read-only mapping of a whole file (native builds); the browser passes its own buffer instead.
class MappedFile {
 public:
  static std::unique_ptr<MappedFile> Open(const std::string& path);  // throws gpt2::Error
  ~MappedFile();
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace gpt2
