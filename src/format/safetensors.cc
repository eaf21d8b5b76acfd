#include "format/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/error.h"
#include "base/text.h"
#include "format/f16.h"
#include "format/json.h"

namespace gpt2 {

namespace {

// huggingface/safetensors MAX_HEADER_SIZE.
constexpr uint64_t kMaxHeaderBytes = 100000000;

// A JSON number that is a non-negative integer (offsets and dimensions).
bool NonNegativeInteger(const JsonValue& v, uint64_t* out) {
  if (v.kind != JsonValue::Kind::kNumber || !v.is_integer || v.integer < 0) return false;
  *out = static_cast<uint64_t>(v.integer);
  return true;
}

float Bf16ToF32(uint16_t h) {
  // bfloat16 is the top half of an IEEE float32.
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

}  // namespace

int64_t SafetensorsTensor::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t SafetensorsDtypeSize(const std::string& dtype) {
  // The dtypes of safetensors' Dtype enum.
  static const struct {
    const char* name;
    size_t size;
  } kDtypes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8},
  };
  for (const auto& d : kDtypes) {
    if (dtype == d.name) return d.size;
  }
  return 0;
}

uint64_t SafetensorsFile::HeaderEnd(const uint8_t* data, size_t size, uint64_t file_size,
                                    const std::string& what) {
  if (size < 8 || file_size < 8) {
    throw Error(what + ": file is " + std::to_string(std::min<uint64_t>(size, file_size)) +
                " bytes, too short for the 8-byte safetensors header length");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
  if (header_len > kMaxHeaderBytes) {
    throw Error(what + ": header length " + std::to_string(header_len) +
                " exceeds the 100,000,000-byte limit (not a safetensors file?)");
  }
  if (header_len > file_size - 8) {
    throw Error(what + ": header length " + std::to_string(header_len) +
                " runs past the end of the " + std::to_string(file_size) +
                "-byte file (truncated download?)");
  }
  return 8 + header_len;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::Parse(const uint8_t* data, size_t size,
                                                        const std::string& what) {
  return ParseImpl(data, size, size, /*with_data=*/true, what);
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::ParseHeader(const uint8_t* prefix,
                                                              size_t prefix_size,
                                                              uint64_t file_size,
                                                              const std::string& what) {
  return ParseImpl(prefix, prefix_size, file_size, /*with_data=*/false, what);
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::ParseImpl(const uint8_t* data, size_t size,
                                                            uint64_t file_size, bool with_data,
                                                            const std::string& what) {
  const uint64_t header_end = HeaderEnd(data, size, file_size, what);
  if (header_end > size) {
    throw Error(what + ": " + std::to_string(size) + " bytes given, the header needs " +
                std::to_string(header_end));
  }
  const uint64_t header_len = header_end - 8;
  const char* header = reinterpret_cast<const char*>(data + 8);
  const std::string where = what + " header";
  if (header_len == 0 || header[0] != '{') {
    throw Error(where + ": does not start with '{' (not a safetensors file?)");
  }
  JsonValue root = ParseJson(header, header_len, where);
  if (root.kind != JsonValue::Kind::kObject) throw Error(where + ": not a JSON object");

  const uint64_t data_size = file_size - header_end;

  auto file = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  std::vector<std::pair<uint64_t, uint64_t>> extents;  // begin, end for the overlap check
  std::vector<size_t> extent_owner;
  for (const auto& kv : root.object) {
    const std::string& name = kv.first;
    const JsonValue& entry = kv.second;
    if (name == "__metadata__") {
      if (entry.kind != JsonValue::Kind::kObject)
        throw Error(where + ": __metadata__ is not an object");
      for (const auto& m : entry.object) {
        if (m.second.kind != JsonValue::Kind::kString) {
          throw Error(where + ": __metadata__ value \"" + m.first + "\" is not a string");
        }
        file->metadata_.emplace_back(m.first, m.second.str);
      }
      continue;
    }
    const std::string at = where + ": tensor '" + name + "'";
    if (entry.kind != JsonValue::Kind::kObject) throw Error(at + " is not an object");
    const JsonValue* dtype = entry.Find("dtype");
    const JsonValue* shape = entry.Find("shape");
    const JsonValue* offsets = entry.Find("data_offsets");
    if (!dtype || dtype->kind != JsonValue::Kind::kString)
      throw Error(at + " has no \"dtype\" string");
    if (!shape || shape->kind != JsonValue::Kind::kArray)
      throw Error(at + " has no \"shape\" array");
    if (!offsets || offsets->kind != JsonValue::Kind::kArray || offsets->array.size() != 2) {
      throw Error(at + " has no \"data_offsets\" pair");
    }
    for (const auto& field : entry.object) {
      if (field.first != "dtype" && field.first != "shape" && field.first != "data_offsets") {
        throw Error(at + " has an unknown field \"" + field.first + "\"");
      }
    }
    SafetensorsTensor t;
    t.name = name;
    t.dtype = dtype->str;
    const size_t elem_size = SafetensorsDtypeSize(t.dtype);
    if (elem_size == 0) throw Error(at + " has unknown dtype \"" + t.dtype + "\"");

    uint64_t n_elements = 1;
    for (const JsonValue& d : shape->array) {
      uint64_t dim = 0;
      if (!NonNegativeInteger(d, &dim))
        throw Error(at + " has a shape entry that is not a non-negative integer");
      // Keep every product below 2^62 so the byte count below cannot overflow either.
      if (dim != 0 && n_elements > (uint64_t{1} << 62) / dim)
        throw Error(at + " has an absurd shape (element count overflows)");
      n_elements *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    uint64_t begin = 0, end = 0;
    if (!NonNegativeInteger(offsets->array[0], &begin) ||
        !NonNegativeInteger(offsets->array[1], &end)) {
      throw Error(at + " has data_offsets that are not non-negative integers");
    }
    if (begin > end)
      throw Error(at + " has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                  "] with begin > end");
    if (end > data_size) {
      throw Error(at + " has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                  "] past the end of the " + std::to_string(data_size) +
                  "-byte data section (truncated file?)");
    }
    if (n_elements > (uint64_t{1} << 62) / elem_size || end - begin != n_elements * elem_size) {
      throw Error(at + " is " + std::to_string(end - begin) + " bytes but " + t.dtype + " " +
                  ShapeString(t.shape) + " needs " + std::to_string(n_elements * elem_size));
    }
    if (end - begin > SIZE_MAX) {
      throw Error(at + " is " + std::to_string(end - begin) +
                  " bytes, more than this build can address");
    }
    t.offset = header_end + begin;
    if (with_data) t.data = data + t.offset;
    t.nbytes = static_cast<size_t>(end - begin);
    extents.emplace_back(begin, end);
    extent_owner.push_back(file->tensors_.size());
    file->tensors_.push_back(std::move(t));
  }

  // Overlapping tensors would alias each other's data; the format forbids it.
  std::vector<size_t> order(extents.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return extents[a] < extents[b]; });
  uint64_t max_end = 0;
  size_t max_owner = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const auto& cur = extents[order[k]];
    if (cur.second == cur.first) continue;  // empty tensors occupy no bytes
    if (cur.first < max_end) {
      throw Error(where + ": tensors '" + file->tensors_[extent_owner[max_owner]].name + "' and '" +
                  file->tensors_[extent_owner[order[k]]].name + "' overlap");
    }
    max_end = cur.second;
    max_owner = order[k];
  }
  return file;
}

const SafetensorsTensor* SafetensorsFile::Find(const std::string& name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

void ReadAsF32(const SafetensorsTensor& tensor, int64_t first, int64_t n, float* out) {
  if (tensor.dtype == "F32") {
    std::memcpy(out, tensor.data + size_t(first) * sizeof(float),
                size_t(n) * sizeof(float));  // little-endian host, as the file
  } else if (tensor.dtype == "F16" || tensor.dtype == "BF16") {
    const bool bf16 = tensor.dtype == "BF16";
    const uint8_t* in = tensor.data + size_t(first) * 2;
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h = static_cast<uint16_t>(in[2 * i] | (in[2 * i + 1] << 8));
      out[i] = bf16 ? Bf16ToF32(h) : F16ToF32(h);
    }
  } else {
    throw Error("tensor '" + tensor.name + "' has dtype " + tensor.dtype +
                "; expected F32, F16 or BF16");
  }
}

std::vector<float> ReadAsF32(const SafetensorsTensor& tensor) {
  std::vector<float> out(static_cast<size_t>(tensor.NumElements()));
  ReadAsF32(tensor, 0, static_cast<int64_t>(out.size()), out.data());
  return out;
}

}  // namespace gpt2
