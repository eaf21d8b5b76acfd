// The input layout of the converter fuzzers: [u16 little-endian length of a JSON text][the JSON]
// [the rest: a safetensors file]. make_seeds.py writes the seeds this way.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

struct JsonAndBytes {
  std::string json;
  const uint8_t* bytes;
  size_t size;
};

// Needs size >= 2; a length past the end takes what there is.
inline JsonAndBytes SplitJsonAndBytes(const uint8_t* data, size_t size) {
  const size_t json_size = std::min<size_t>(data[0] | (data[1] << 8), size - 2);
  return {std::string(reinterpret_cast<const char*>(data + 2), json_size), data + 2 + json_size,
          size - 2 - json_size};
}
