// Test-side conveniences over the engine's JSON reader (src/format/json.h), for the reference
// outputs and golden files the tests read: a whole file, lookups that throw (a missing key is a
// failing test, not a crash) and arrays of numbers.
#pragma once

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "format/json.h"

namespace gpt2_test {

using Json = gpt2::JsonValue;

inline Json ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw gpt2::Error("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return gpt2::ParseJson(ss.str(), path);
}

inline const Json& At(const Json& v, const std::string& key) {
  const Json* found = v.Find(key);
  if (found == nullptr) throw gpt2::Error("json: no key '" + key + "'");
  return *found;
}

inline const Json& At(const Json& v, size_t i) {
  if (i >= v.array.size()) throw gpt2::Error("json: no element " + std::to_string(i));
  return v.array[i];
}

// An array's numbers; null entries (how the reference scripts write -inf) become -infinity.
inline std::vector<double> Numbers(const Json& v) {
  std::vector<double> out;
  for (const Json& x : v.array) out.push_back(x.kind == Json::Kind::kNumber ? x.number : -INFINITY);
  return out;
}

}  // namespace gpt2_test
