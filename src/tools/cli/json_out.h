// The JSON the CLI writes (--json of inspect, attribute, heads, compare, saliency, atp,
// features): numbers with 9 significant digits ("%.9g": a float reads back exactly; non-finite
// values as null), strings escaped, and a file written whole or not at all.
#pragma once

#include <cstddef>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "base/error.h"

namespace gpt2 {

void JsonString(std::ostream& out, const std::string& s);
void JsonNumber(std::ostream& out, double v);

template <typename T>
void JsonArray(std::ostream& out, const T* values, size_t n) {
  out << '[';
  for (size_t i = 0; i < n; ++i) {
    if (i) out << ',';
    if constexpr (std::is_floating_point<T>::value) JsonNumber(out, values[i]);
    else out << values[i];
  }
  out << ']';
}
template <typename T>
void JsonArray(std::ostream& out, const std::vector<T>& values) {
  JsonArray(out, values.data(), values.size());
}

// Calls write(out) for the document, through path + ".tmp" and a rename, so a failed run never
// leaves a partial file under the final name. Throws gpt2::Error when it cannot be written.
template <typename Write>
void WriteJsonFile(const std::string& path, Write write) {
  std::ofstream out(path + ".tmp", std::ios::binary);
  if (!out) throw Error("cannot write '" + path + "'");
  write(static_cast<std::ostream&>(out));
  out.close();
  if (!out || std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
    throw Error("cannot write '" + path + "'");
  }
}

}  // namespace gpt2
