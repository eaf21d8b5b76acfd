// A small strict JSON reader (RFC 8259) for the few JSON files the converter reads: the
// safetensors header, Hugging Face config.json and vocab.json; and the writer's pieces the CLI's
// --json and the lab's JSON documents (the attribution graph's file) share, at the bottom.
//
// Checks: nesting depth <= 64, strings are valid escapes (\uXXXX surrogate pairs become UTF-8),
// numbers follow the JSON grammar, no trailing garbage except whitespace, object keys are kept
// in file order (duplicates are an error, as the safetensors spec requires). Every failure is a
// gpt2::Error naming the byte offset, prefixed by `what` ("safetensors header", "config.json").
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>
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

// Writing: numbers with 9 significant digits ("%.9g": a float reads back exactly; non-finite
// values as null), strings escaped (bytes >= 0x80 pass through as they are).
void JsonString(std::ostream& out, const std::string& s);
void JsonNumber(std::ostream& out, double v);

template <typename T>
void JsonArray(std::ostream& out, const T* values, size_t n) {
  out << '[';
  for (size_t i = 0; i < n; ++i) {
    if (i) out << ',';
    if constexpr (std::is_floating_point<T>::value)
      JsonNumber(out, values[i]);
    else
      out << values[i];
  }
  out << ']';
}
template <typename T>
void JsonArray(std::ostream& out, const std::vector<T>& values) {
  JsonArray(out, values.data(), values.size());
}

}  // namespace gpt2
