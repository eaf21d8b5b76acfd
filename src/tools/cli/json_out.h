// The JSON the CLI writes (--json of inspect, attribute, heads, compare, saliency, atp,
// features, graph): format/json.h's writer, and a file written whole or not at all.
#pragma once

#include <cstddef>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "format/json.h"

namespace gpt2 {

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
