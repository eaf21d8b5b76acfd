// GGUF reader/writer. The layout and the checks are specified in gguf.h; the byte format follows
// ggml/docs/gguf.md and ggml's gguf.cpp (gguf_init_from_file_impl / gguf_write_to_buf).
#include "format/gguf.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>

#include "base/error.h"

#ifndef __EMSCRIPTEN__
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace gpt2 {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kDefaultAlignment = 32;   // GGUF_DEFAULT_ALIGNMENT
constexpr int kMaxDims = 4;                  // GGML_MAX_DIMS
// GetArray expands arrays into GgufValue objects (~100 bytes each), so a hostile file with a
// huge u8 array could make a small file cost gigabytes of memory there. GPT-2's largest arrays
// (tokens, merges) hold ~50k entries; real GGUF vocabularies stay below ~300k.
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 24;

// Smallest encoding of one tensor info: name length (8) + n_dims (4) + ne[0] (8) + type (4) +
// offset (8). Used to bound n_tensors by the bytes that remain before reserving anything.
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
// Smallest key/value: key length (8) + value type (4) + a one-byte value.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;

std::string Quote(const std::string& s) { return "'" + s + "'"; }

bool IsLittleEndianHost() {
  const uint16_t probe = 1;
  uint8_t first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

const char* ValueTypeName(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
      return "u8";
    case GgufValueType::kI8:
      return "i8";
    case GgufValueType::kU16:
      return "u16";
    case GgufValueType::kI16:
      return "i16";
    case GgufValueType::kU32:
      return "u32";
    case GgufValueType::kI32:
      return "i32";
    case GgufValueType::kF32:
      return "f32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kU64:
      return "u64";
    case GgufValueType::kI64:
      return "i64";
    case GgufValueType::kF64:
      return "f64";
  }
  return "unknown";
}

bool IsKnownValueType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kF64); }

// Encoded size of a scalar (0 for string/array, which are variable-sized).
uint64_t ScalarBytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

// What a read is of, for its error message: a string, or a callable that makes the string only
// if the read fails (the vocabulary's 100k array elements would otherwise build 100k messages:
// 125 ms of a GPT-2 load in wasm).
inline std::string Describe(const std::string& what) { return what; }
template <typename F, typename = decltype(std::declval<const F&>()())>
std::string Describe(const F& what) {
  return what();
}

// A cursor over the caller's buffer. Every read checks the remaining length first and reports
// what was being read and where, so a truncated file says which field it lost.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename What>
  void Need(uint64_t n, const What& what) const {
    if (n > remaining()) {
      throw Error("GGUF file is truncated: " + Describe(what) + " ends at byte " +
                  std::to_string(static_cast<uint64_t>(pos_) + n) + " but the file has " +
                  std::to_string(size_) + " bytes");
    }
  }

  template <typename T, typename What>
  T Read(const What& what) {
    Need(sizeof(T), what);
    T v;
    // GGUF is little-endian; so are x86, ARM (as used) and wasm, checked in Parse.
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  void Skip(uint64_t n) { pos_ += static_cast<size_t>(n); }  // after Need(n, ...)
  void Seek(size_t pos) { pos_ = pos; }

  template <typename What>
  void SkipString(const What& what) {
    const uint64_t len = Read<uint64_t>([&] { return Describe(what) + " (length)"; });
    Need(len, [&] { return Describe(what) + " (" + std::to_string(len) + " bytes)"; });
    Skip(len);
  }

  template <typename What>
  std::string ReadString(const What& what) {
    const uint64_t len = Read<uint64_t>([&] { return Describe(what) + " (length)"; });
    // Bounded by the remaining bytes before anything is allocated.
    Need(len, [&] { return Describe(what) + " (" + std::to_string(len) + " bytes)"; });
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

template <typename What>
GgufValue ReadScalarOrString(Reader& r, GgufValueType type, const What& what) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufValueType::kU8:
      v.u = r.Read<uint8_t>(what);
      break;
    case GgufValueType::kI8:
      v.i = r.Read<int8_t>(what);
      break;
    case GgufValueType::kU16:
      v.u = r.Read<uint16_t>(what);
      break;
    case GgufValueType::kI16:
      v.i = r.Read<int16_t>(what);
      break;
    case GgufValueType::kU32:
      v.u = r.Read<uint32_t>(what);
      break;
    case GgufValueType::kI32:
      v.i = r.Read<int32_t>(what);
      break;
    case GgufValueType::kF32:
      v.f = r.Read<float>(what);
      break;
    case GgufValueType::kU64:
      v.u = r.Read<uint64_t>(what);
      break;
    case GgufValueType::kI64:
      v.i = r.Read<int64_t>(what);
      break;
    case GgufValueType::kF64:
      v.f = r.Read<double>(what);
      break;
    case GgufValueType::kBool: {
      const size_t at = r.pos();
      const uint8_t b = r.Read<uint8_t>(what);
      // gguf.md: "Anything else is invalid, and should be treated as ... the model being invalid".
      if (b > 1) {
        throw Error("GGUF " + Describe(what) + " is a bool with value " + std::to_string(b) +
                    " at byte " + std::to_string(at) + " (must be 0 or 1)");
      }
      v.u = b;
      break;
    }
    case GgufValueType::kString:
      v.str = r.ReadString(what);
      break;
    case GgufValueType::kArray:
      throw Error("internal error: ReadScalarOrString called for an array");
  }
  return v;
}

// ReadScalarOrString's checks without building the value (a string is not copied).
template <typename What>
void SkipScalarOrString(Reader& r, GgufValueType type, const What& what) {
  if (type == GgufValueType::kString) {
    r.SkipString(what);
  } else if (type == GgufValueType::kBool) {
    ReadScalarOrString(r, type, what);
  } else {
    r.Need(ScalarBytes(type), what);
    r.Skip(ScalarBytes(type));
  }
}

GgufValue ReadValue(Reader& r, uint32_t raw_type, const std::string& key) {
  const std::string what = "value of metadata key " + Quote(key);
  if (!IsKnownValueType(raw_type)) {
    throw Error("GGUF metadata key " + Quote(key) + " has unknown value type " +
                std::to_string(raw_type) + " (byte " + std::to_string(r.pos() - 4) +
                "; known types are 0..12)");
  }
  const auto type = static_cast<GgufValueType>(raw_type);
  if (type != GgufValueType::kArray) return ReadScalarOrString(r, type, what);

  GgufValue v;
  v.type = GgufValueType::kArray;
  const uint32_t raw_elem = r.Read<uint32_t>("array element type of metadata key " + Quote(key));
  if (raw_elem == static_cast<uint32_t>(GgufValueType::kArray)) {
    throw Error("GGUF metadata key " + Quote(key) +
                " is an array of arrays, which this reader does not support");
  }
  if (!IsKnownValueType(raw_elem)) {
    throw Error("GGUF metadata key " + Quote(key) + " is an array of unknown value type " +
                std::to_string(raw_elem) + " (known types are 0..12)");
  }
  v.array_type = static_cast<GgufValueType>(raw_elem);
  const uint64_t count = r.Read<uint64_t>("array length of metadata key " + Quote(key));
  // Each element takes at least its scalar size (8 for a string's length), so the count is
  // checked against the remaining bytes before reserving memory for it.
  const uint64_t min_elem = v.array_type == GgufValueType::kString ? 8 : ScalarBytes(v.array_type);
  if (count > r.remaining() / min_elem) {
    throw Error("GGUF file is truncated or corrupt: metadata key " + Quote(key) + " claims " +
                std::to_string(count) + " " + ValueTypeName(v.array_type) +
                " elements, needing at least " + std::to_string(min_elem) +
                " bytes each, but only " + std::to_string(r.remaining()) +
                " bytes remain after byte " + std::to_string(r.pos()));
  }
  if (count > kMaxArrayElements) {
    throw Error("GGUF metadata key " + Quote(key) + " is an array of " + std::to_string(count) +
                " elements, more than this reader accepts (" + std::to_string(kMaxArrayElements) +
                ")");
  }
  v.array_count = count;
  v.array_offset = r.pos();
  // Checked now (so GetArray cannot fail later), kept in the file's buffer.
  for (uint64_t k = 0; k < count; ++k) {
    SkipScalarOrString(r, v.array_type, [&] {
      return "element " + std::to_string(k) + " of metadata key " + Quote(key);
    });
  }
  return v;
}

uint64_t AlignUp(uint64_t x, uint64_t alignment) {
  return (x + alignment - 1) / alignment * alignment;
}

bool IsPowerOfTwo(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace

// --- GgufFile -------------------------------------------------------------------------------

std::unique_ptr<GgufFile> GgufFile::Parse(const uint8_t* data, size_t size) {
  if (!IsLittleEndianHost()) throw Error("GGUF reader needs a little-endian host");
  if (data == nullptr && size != 0) throw Error("GGUF parse: null buffer of non-zero size");
  static const uint8_t kEmpty[1] = {0};
  if (data == nullptr) data = kEmpty;

  auto file = std::unique_ptr<GgufFile>(new GgufFile());
  file->size_ = size;
  file->data_ = data;
  Reader r(data, size);

  const uint32_t magic = r.Read<uint32_t>("magic number");
  if (magic != kGgufMagic) {
    std::string shown;
    for (int k = 0; k < 4; ++k) {
      const char c = static_cast<char>(data[k]);
      shown += (c >= 32 && c < 127) ? c : '?';
    }
    throw Error("not a GGUF file: it starts with '" + shown + "' instead of 'GGUF'");
  }
  const uint32_t version = r.Read<uint32_t>("version");
  if (version == 1) {
    throw Error(
        "GGUF version 1 is not supported (its counts are 32-bit and it predates the "
        "final format); re-convert the model to GGUF v3");
  }
  if (version != 2 && version != 3) {
    std::string hint;
    if ((version & 0xffff) == 0 && version != 0) hint = " (the file looks big-endian)";
    throw Error("GGUF version " + std::to_string(version) + " is not supported" + hint +
                "; this reader understands versions 2 and 3");
  }
  file->version_ = version;

  const uint64_t n_tensors = r.Read<uint64_t>("tensor count");
  const uint64_t n_kv = r.Read<uint64_t>("metadata count");
  if (n_kv > r.remaining() / kMinKeyValueBytes) {
    throw Error("GGUF header claims " + std::to_string(n_kv) + " metadata entries but only " +
                std::to_string(r.remaining()) +
                " bytes follow the header (each entry needs at "
                "least " +
                std::to_string(kMinKeyValueBytes) + "); the file is corrupt or truncated");
  }
  if (n_tensors > r.remaining() / kMinTensorInfoBytes) {
    throw Error("GGUF header claims " + std::to_string(n_tensors) + " tensors but only " +
                std::to_string(r.remaining()) +
                " bytes follow the header (each tensor info "
                "needs at least " +
                std::to_string(kMinTensorInfoBytes) + "); the file is corrupt or truncated");
  }

  // --- Metadata ---
  std::unordered_set<std::string> keys;
  file->metadata_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    GgufKeyValue kv;
    kv.key = r.ReadString("key of metadata entry " + std::to_string(k));
    if (!keys.insert(kv.key).second) {
      throw Error("GGUF metadata key " + Quote(kv.key) + " appears more than once (entry " +
                  std::to_string(k) + ")");
    }
    const uint32_t raw_type = r.Read<uint32_t>("value type of metadata key " + Quote(kv.key));
    kv.value = ReadValue(r, raw_type, kv.key);
    file->metadata_.push_back(std::move(kv));
  }

  if (const GgufValue* a = file->Find("general.alignment")) {
    if (a->type != GgufValueType::kU32) {
      throw Error(std::string("GGUF metadata key 'general.alignment' must be a u32, not ") +
                  ValueTypeName(a->type));
    }
    if (!IsPowerOfTwo(a->u)) {
      throw Error("GGUF general.alignment is " + std::to_string(a->u) +
                  ", which is not a power of two");
    }
    file->alignment_ = static_cast<uint32_t>(a->u);
  } else {
    file->alignment_ = kDefaultAlignment;
  }

  // --- Tensor infos ---
  std::unordered_set<std::string> names;
  file->tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t t = 0; t < n_tensors; ++t) {
    GgufTensor ti;
    const std::string index = "tensor info " + std::to_string(t);
    ti.name = r.ReadString("name of " + index);
    const std::string where = index + " (" + Quote(ti.name) + ")";
    if (!names.insert(ti.name).second) {
      throw Error("GGUF tensor name " + Quote(ti.name) + " appears more than once (" + index + ")");
    }
    const uint32_t n_dims = r.Read<uint32_t>(where);
    if (n_dims < 1 || n_dims > static_cast<uint32_t>(kMaxDims)) {
      throw Error("tensor " + Quote(ti.name) + " has " + std::to_string(n_dims) +
                  " dimensions; GGUF tensors have 1 to 4");
    }
    ti.n_dims = static_cast<int>(n_dims);
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = r.Read<uint64_t>(where);
      if (ne == 0) {
        throw Error("tensor " + Quote(ti.name) + " has size 0 in dimension " + std::to_string(d));
      }
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          static_cast<int64_t>(ne) > std::numeric_limits<int64_t>::max() / n_elements) {
        throw Error("tensor " + Quote(ti.name) +
                    " has an element count that overflows 64 bits "
                    "(dimension " +
                    std::to_string(d) + " is " + std::to_string(ne) + ")");
      }
      ti.ne[d] = static_cast<int64_t>(ne);
      n_elements *= ti.ne[d];
    }
    const uint32_t raw_type = r.Read<uint32_t>(where);
    if (!IsSupportedType(raw_type)) {
      throw Error("tensor " + Quote(ti.name) + " has type " + GgmlTypeName(raw_type) +
                  (std::strcmp(GgmlTypeName(raw_type), "unknown") == 0
                       ? " (id " + std::to_string(raw_type) + ")"
                       : std::string()) +
                  ", which this engine does not support (supported: f32, f16, q8_0, q4_0)");
    }
    ti.type = static_cast<TensorType>(raw_type);
    const int64_t block = TypeBlockSize(ti.type);
    if (ti.ne[0] % block != 0) {
      throw Error("tensor " + Quote(ti.name) + " of type " + GgmlTypeName(raw_type) + " has " +
                  std::to_string(ti.ne[0]) +
                  " elements per row, not a multiple of its block size " + std::to_string(block));
    }
    ti.offset = r.Read<uint64_t>(where);
    if (ti.offset % file->alignment_ != 0) {
      throw Error("tensor " + Quote(ti.name) + " has data offset " + std::to_string(ti.offset) +
                  ", which is not a multiple of the alignment " + std::to_string(file->alignment_));
    }
    // Size in bytes, formed only once it is known not to overflow size_t (32 bits in wasm);
    // whether it fits in the file is checked with the offsets below.
    const uint64_t n_blocks = static_cast<uint64_t>(n_elements / block);
    const uint64_t block_bytes = TypeBlockBytes(ti.type);
    if (n_blocks > std::numeric_limits<size_t>::max() / block_bytes) {
      throw Error("tensor " + Quote(ti.name) + " is too large: " + std::to_string(n_elements) +
                  " elements of type " + GgmlTypeName(raw_type) +
                  " need more bytes than this platform can address");
    }
    ti.nbytes = static_cast<size_t>(n_blocks * block_bytes);
    file->tensors_.push_back(std::move(ti));
  }

  // --- Tensor data ---
  const uint64_t data_start = AlignUp(r.pos(), file->alignment_);
  if (!file->tensors_.empty() && data_start > size) {
    throw Error("GGUF file is truncated: the tensor data section starts at byte " +
                std::to_string(data_start) + " but the file has " + std::to_string(size) +
                " bytes");
  }
  const uint64_t data_size = file->tensors_.empty() ? 0 : size - data_start;
  for (GgufTensor& ti : file->tensors_) {
    if (ti.offset > data_size || ti.nbytes > data_size - ti.offset) {
      throw Error("GGUF file is truncated: tensor " + Quote(ti.name) + " (" +
                  std::to_string(ti.nbytes) + " bytes at data offset " + std::to_string(ti.offset) +
                  ") ends at byte " + std::to_string(data_start + ti.offset + ti.nbytes) +
                  " but the file has " + std::to_string(size) + " bytes");
    }
    ti.data = data + data_start + ti.offset;
  }
  return file;
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  for (const GgufKeyValue& kv : metadata_) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

const GgufTensor* GgufFile::FindTensor(const std::string& name) const {
  for (const GgufTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

const GgufValue& Require(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) throw Error("GGUF metadata key " + Quote(key) + " is missing");
  return *v;
}

[[noreturn]] void ThrowWrongType(const std::string& key, const GgufValue& v, const char* wanted) {
  throw Error("GGUF metadata key " + Quote(key) + " is " + ValueTypeName(v.type) + ", expected " +
              wanted);
}

}  // namespace

uint32_t GgufFile::GetU32(const std::string& key) const {
  const GgufValue& v = Require(*this, key);
  switch (v.type) {
    case GgufValueType::kU8:
    case GgufValueType::kU16:
    case GgufValueType::kU32:
    case GgufValueType::kU64:
      if (v.u > std::numeric_limits<uint32_t>::max()) break;
      return static_cast<uint32_t>(v.u);
    case GgufValueType::kI8:
    case GgufValueType::kI16:
    case GgufValueType::kI32:
    case GgufValueType::kI64:
      if (v.i < 0 || static_cast<uint64_t>(v.i) > std::numeric_limits<uint32_t>::max()) break;
      return static_cast<uint32_t>(v.i);
    default:
      ThrowWrongType(key, v, "an integer");
  }
  const bool is_unsigned = v.type == GgufValueType::kU8 || v.type == GgufValueType::kU16 ||
                           v.type == GgufValueType::kU32 || v.type == GgufValueType::kU64;
  throw Error("GGUF metadata key " + Quote(key) + " has " + ValueTypeName(v.type) + " value " +
              (is_unsigned ? std::to_string(v.u) : std::to_string(v.i)) +
              ", outside the u32 range 0..4294967295");
}

float GgufFile::GetF32(const std::string& key) const {
  const GgufValue& v = Require(*this, key);
  if (v.type != GgufValueType::kF32 && v.type != GgufValueType::kF64) {
    ThrowWrongType(key, v, "f32 or f64");
  }
  return static_cast<float>(v.f);
}

std::string GgufFile::GetString(const std::string& key) const {
  const GgufValue& v = Require(*this, key);
  if (v.type != GgufValueType::kString) ThrowWrongType(key, v, "a string");
  return v.str;
}

std::vector<std::string> GgufFile::GetStringArray(const std::string& key) const {
  const GgufValue& v = Require(*this, key);
  if (v.type != GgufValueType::kArray || v.array_type != GgufValueType::kString) {
    throw Error("GGUF metadata key " + Quote(key) + " is " + ValueTypeName(v.type) +
                (v.type == GgufValueType::kArray ? std::string(" of ") + ValueTypeName(v.array_type)
                                                 : std::string()) +
                ", expected an array of strings");
  }
  Reader r(data_, static_cast<size_t>(size_));
  r.Seek(static_cast<size_t>(v.array_offset));
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(v.array_count));
  for (uint64_t k = 0; k < v.array_count; ++k) out.push_back(r.ReadString("an array element"));
  return out;
}

std::vector<GgufValue> GgufFile::GetArray(const std::string& key) const {
  const GgufValue& v = Require(*this, key);
  if (v.type != GgufValueType::kArray) ThrowWrongType(key, v, "an array");
  Reader r(data_, static_cast<size_t>(size_));
  r.Seek(static_cast<size_t>(v.array_offset));
  std::vector<GgufValue> out;
  out.reserve(static_cast<size_t>(v.array_count));
  for (uint64_t k = 0; k < v.array_count; ++k) {
    out.push_back(ReadScalarOrString(r, v.array_type, "an array element"));
  }
  return out;
}

// --- GgufWriter -----------------------------------------------------------------------------

namespace {

class ByteSink {
 public:
  explicit ByteSink(std::vector<uint8_t>* out) : out_(out) {}
  template <typename T>
  void Put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_->insert(out_->end(), b, b + sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    out_->insert(out_->end(), s.begin(), s.end());
  }
  void PadTo(uint64_t alignment) {
    out_->resize(static_cast<size_t>(AlignUp(out_->size(), alignment)), 0);
  }

 private:
  std::vector<uint8_t>* out_;
};

void PutScalarOrString(ByteSink& s, const GgufValue& v, GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
      s.Put<uint8_t>(static_cast<uint8_t>(v.u));
      break;
    case GgufValueType::kI8:
      s.Put<int8_t>(static_cast<int8_t>(v.i));
      break;
    case GgufValueType::kU16:
      s.Put<uint16_t>(static_cast<uint16_t>(v.u));
      break;
    case GgufValueType::kI16:
      s.Put<int16_t>(static_cast<int16_t>(v.i));
      break;
    case GgufValueType::kU32:
      s.Put<uint32_t>(static_cast<uint32_t>(v.u));
      break;
    case GgufValueType::kI32:
      s.Put<int32_t>(static_cast<int32_t>(v.i));
      break;
    case GgufValueType::kF32:
      s.Put<float>(static_cast<float>(v.f));
      break;
    case GgufValueType::kBool:
      s.Put<uint8_t>(v.u ? 1 : 0);
      break;
    case GgufValueType::kString:
      s.PutString(v.str);
      break;
    case GgufValueType::kU64:
      s.Put<uint64_t>(v.u);
      break;
    case GgufValueType::kI64:
      s.Put<int64_t>(v.i);
      break;
    case GgufValueType::kF64:
      s.Put<double>(v.f);
      break;
    case GgufValueType::kArray:
      throw Error("GGUF writer: nested arrays are not supported");
  }
}

void PutValue(ByteSink& s, const GgufValue& v) {
  s.Put<uint32_t>(static_cast<uint32_t>(v.type));
  if (v.type != GgufValueType::kArray) {
    PutScalarOrString(s, v, v.type);
    return;
  }
  s.Put<uint32_t>(static_cast<uint32_t>(v.array_type));
  s.Put<uint64_t>(v.array.size());  // built by the writer: the elements are here
  for (const GgufValue& e : v.array) PutScalarOrString(s, e, v.array_type);
}

}  // namespace

namespace {

void AddChecked(std::vector<std::pair<std::string, GgufValue>>* metadata, const std::string& key,
                GgufValue v) {
  for (const auto& kv : *metadata) {
    if (kv.first == key) throw Error("GGUF writer: metadata key " + Quote(key) + " added twice");
  }
  metadata->emplace_back(key, std::move(v));
}

GgufValue Unsigned(GgufValueType t, uint64_t u) {
  GgufValue v;
  v.type = t;
  v.u = u;
  return v;
}

GgufValue Signed(GgufValueType t, int64_t i) {
  GgufValue v;
  v.type = t;
  v.i = i;
  return v;
}

}  // namespace

void GgufWriter::AddU32(const std::string& key, uint32_t v) {
  AddChecked(&metadata_, key, Unsigned(GgufValueType::kU32, v));
}

void GgufWriter::AddI32(const std::string& key, int32_t v) {
  AddChecked(&metadata_, key, Signed(GgufValueType::kI32, v));
}

void GgufWriter::AddF32(const std::string& key, float v) {
  GgufValue value;
  value.type = GgufValueType::kF32;
  value.f = v;
  AddChecked(&metadata_, key, std::move(value));
}

void GgufWriter::AddBool(const std::string& key, bool v) {
  AddChecked(&metadata_, key, Unsigned(GgufValueType::kBool, v ? 1 : 0));
}

void GgufWriter::AddString(const std::string& key, const std::string& v) {
  GgufValue value;
  value.type = GgufValueType::kString;
  value.str = v;
  AddChecked(&metadata_, key, std::move(value));
}

void GgufWriter::AddStringArray(const std::string& key, const std::vector<std::string>& v) {
  GgufValue value;
  value.type = GgufValueType::kArray;
  value.array_type = GgufValueType::kString;
  value.array.resize(v.size());
  for (size_t k = 0; k < v.size(); ++k) {
    value.array[k].type = GgufValueType::kString;
    value.array[k].str = v[k];
  }
  AddChecked(&metadata_, key, std::move(value));
}

void GgufWriter::AddI32Array(const std::string& key, const std::vector<int32_t>& v) {
  GgufValue value;
  value.type = GgufValueType::kArray;
  value.array_type = GgufValueType::kI32;
  value.array.reserve(v.size());
  for (int32_t x : v) value.array.push_back(Signed(GgufValueType::kI32, x));
  AddChecked(&metadata_, key, std::move(value));
}

uint64_t GgufWriter::CheckTensor(const std::string& name, TensorType type,
                                 const std::vector<int64_t>& ne) const {
  if (!IsSupportedType(static_cast<uint32_t>(type))) {
    throw Error("GGUF writer: tensor " + Quote(name) + " has unsupported type " +
                GgmlTypeName(static_cast<uint32_t>(type)));
  }
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims)) {
    throw Error("GGUF writer: tensor " + Quote(name) + " has " + std::to_string(ne.size()) +
                " dimensions; GGUF tensors have 1 to 4");
  }
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) throw Error("GGUF writer: tensor " + Quote(name) + " added twice");
  }
  int64_t rows = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 1) {
      throw Error("GGUF writer: tensor " + Quote(name) + " has size " + std::to_string(ne[d]) +
                  " in dimension " + std::to_string(d));
    }
    if (d > 0) rows *= ne[d];
  }
  if (ne[0] % TypeBlockSize(type) != 0) {
    throw Error("GGUF writer: tensor " + Quote(name) + " has " + std::to_string(ne[0]) +
                " elements per row, not a multiple of the " +
                GgmlTypeName(static_cast<uint32_t>(type)) + " block size " +
                std::to_string(TypeBlockSize(type)));
  }
  return static_cast<uint64_t>(RowBytes(type, ne[0])) * static_cast<uint64_t>(rows);
}

void GgufWriter::AddTensor(const std::string& name, TensorType type, const std::vector<int64_t>& ne,
                           const void* data, size_t nbytes) {
  const uint64_t expected = CheckTensor(name, type, ne);
  if (nbytes != expected) {
    throw Error("GGUF writer: tensor " + Quote(name) + " was given " + std::to_string(nbytes) +
                " bytes but its shape and type need " + std::to_string(expected));
  }
  PendingTensor t;
  t.name = name;
  t.type = type;
  t.ne = ne;
  t.nbytes = expected;
  t.has_data = true;
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  t.bytes.assign(bytes, bytes + nbytes);
  tensors_.push_back(std::move(t));
}

void GgufWriter::AddTensorInfo(const std::string& name, TensorType type,
                               const std::vector<int64_t>& ne) {
  PendingTensor t;
  t.nbytes = CheckTensor(name, type, ne);
  t.name = name;
  t.type = type;
  t.ne = ne;
  tensors_.push_back(std::move(t));
}

GgufWriter::Layout GgufWriter::MakeLayout(uint32_t alignment) const {
  if (!IsPowerOfTwo(alignment)) {
    throw Error("GGUF writer: alignment " + std::to_string(alignment) + " is not a power of two");
  }
  bool has_alignment_key = false;
  for (const auto& kv : metadata_) {
    if (kv.first == "general.alignment") {
      if (kv.second.type != GgufValueType::kU32 || kv.second.u != alignment) {
        throw Error("GGUF writer: metadata general.alignment disagrees with the alignment " +
                    std::to_string(alignment) + " passed to Serialize");
      }
      has_alignment_key = true;
    }
  }
  // general.alignment is only needed when it differs from the default that readers assume.
  const bool write_alignment_key = !has_alignment_key && alignment != kDefaultAlignment;

  Layout layout;
  ByteSink s(&layout.header);
  s.Put<uint32_t>(kGgufMagic);
  s.Put<uint32_t>(3);
  s.Put<uint64_t>(tensors_.size());
  s.Put<uint64_t>(metadata_.size() + (write_alignment_key ? 1 : 0));
  if (write_alignment_key) {
    s.PutString("general.alignment");
    PutValue(s, Unsigned(GgufValueType::kU32, alignment));
  }
  for (const auto& kv : metadata_) {
    s.PutString(kv.first);
    PutValue(s, kv.second);
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    s.PutString(t.name);
    s.Put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) s.Put<uint64_t>(static_cast<uint64_t>(n));
    s.Put<uint32_t>(static_cast<uint32_t>(t.type));
    s.Put<uint64_t>(offset);
    layout.offsets.push_back(offset);
    layout.nbytes.push_back(t.nbytes);
    offset = AlignUp(offset + t.nbytes, alignment);
  }
  // Like ggml's gguf_write_to_buf, every tensor (the last included) is padded to the
  // alignment, so the data section is a whole number of aligned chunks.
  if (!tensors_.empty()) s.PadTo(alignment);
  const uint64_t data_start = layout.header.size();
  for (uint64_t& o : layout.offsets) o += data_start;
  layout.size = data_start + offset;
  return layout;
}

std::vector<uint8_t> GgufWriter::Serialize(uint32_t alignment) const {
  const Layout layout = MakeLayout(alignment);
  if (layout.size > std::numeric_limits<size_t>::max()) {
    throw Error("GGUF writer: the file (" + std::to_string(layout.size) +
                " bytes) does not fit in this build's memory");
  }
  std::vector<uint8_t> out(static_cast<size_t>(layout.size), 0);
  std::memcpy(out.data(), layout.header.data(), layout.header.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensors_[i].has_data) {
      throw Error("GGUF writer: tensor " + Quote(tensors_[i].name) +
                  " was added without data (AddTensorInfo); its bytes go to MakeLayout's offset");
    }
    if (!tensors_[i].bytes.empty()) {
      std::memcpy(out.data() + layout.offsets[i], tensors_[i].bytes.data(),
                  tensors_[i].bytes.size());
    }
  }
  return out;
}

void GgufWriter::WriteFile(const std::string& path, uint32_t alignment) const {
  const std::vector<uint8_t> bytes = Serialize(alignment);
  WriteFileAtomically(path, bytes.data(), bytes.size());
}

void WriteFileAtomically(const std::string& path, const uint8_t* data, uint64_t size) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    throw Error("cannot create " + Quote(tmp) + ": " + std::strerror(errno));
  }
  const size_t n = static_cast<size_t>(size);
  const size_t written = n == 0 ? 0 : std::fwrite(data, 1, n, f);
  const int saved_errno = errno;
  const bool write_ok = written == n && std::fflush(f) == 0;
  const bool close_ok = std::fclose(f) == 0;
  if (!write_ok || !close_ok) {
    std::remove(tmp.c_str());
    throw Error("cannot write " + Quote(tmp) + " (" + std::to_string(size) +
                " bytes): " + std::strerror(saved_errno ? saved_errno : errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(tmp.c_str());
    throw Error("cannot rename " + Quote(tmp) + " to " + Quote(path) + ": " +
                std::strerror(rename_errno));
  }
}

// --- MappedFile -----------------------------------------------------------------------------

#ifndef __EMSCRIPTEN__

std::unique_ptr<MappedFile> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + Quote(path) + ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error("cannot stat " + Quote(path) + ": " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(Quote(path) + " is not a regular file");
  }
  auto file = std::unique_ptr<MappedFile>(new MappedFile());
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      throw Error("cannot map " + Quote(path) + " (" + std::to_string(file->size_) +
                  " bytes): " + std::strerror(e));
    }
    file->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping stays valid after the descriptor is closed
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

#else  // __EMSCRIPTEN__: no useful mmap; read the whole file into the heap.

std::unique_ptr<MappedFile> MappedFile::Open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw Error("cannot open " + Quote(path) + ": " + std::strerror(errno));
  if (std::fseek(f, 0, SEEK_END) != 0) {
    std::fclose(f);
    throw Error("cannot seek in " + Quote(path));
  }
  const long end = std::ftell(f);
  std::rewind(f);
  if (end < 0) {
    std::fclose(f);
    throw Error("cannot find the size of " + Quote(path));
  }
  auto file = std::unique_ptr<MappedFile>(new MappedFile());
  file->size_ = static_cast<size_t>(end);
  if (file->size_ > 0) {
    uint8_t* buf = new uint8_t[file->size_];
    file->data_ = buf;  // owned from here on, freed by the destructor
    if (std::fread(buf, 1, file->size_, f) != file->size_) {
      std::fclose(f);
      throw Error("cannot read " + Quote(path) + " (" + std::to_string(file->size_) + " bytes)");
    }
  }
  std::fclose(f);
  return file;
}

MappedFile::~MappedFile() { delete[] data_; }

#endif

}  // namespace gpt2
