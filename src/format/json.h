// A small strict JSON reader (RFC 8259) for the few JSON files the converter reads: the
// safetensors header, Hugging Face config.json and vocab.json.
//
// Checks: nesting depth <= 64, strings are valid escapes (\uXXXX surrogate pairs become UTF-8),
// numbers follow the JSON grammar, no trailing garbage except whitespace, object keys are kept
// in file order (duplicates are an error, as the safetensors spec requires). Every failure is a
// gpt2::Error naming the byte offset, prefixed by `what` ("safetensors header", "config.json").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpt2 {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  // Numbers that are written as integers (no '.', 'e') and fit in int64 are also kept exactly.
  bool is_integer = false;
  int64_t integer = 0;
  std::string str;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;

  // nullptr when this is not an object or the key is absent.
  const JsonValue* Find(const std::string& key) const;
};

JsonValue ParseJson(const char* text, size_t size, const std::string& what);
inline JsonValue ParseJson(const std::string& text, const std::string& what) {
  return ParseJson(text.data(), text.size(), what);
}

}  // namespace gpt2
