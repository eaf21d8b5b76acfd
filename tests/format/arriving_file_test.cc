// ArrivingFile, the buffer a download is copied into chunk by chunk (the page's model and
// checkpoints): what it refuses, and that what arrives is what is held.
#include "format/arriving_file.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "base/error.h"

namespace {

using Catch::Matchers::Contains;
using gpt2::ArrivingFile;

TEST_CASE("arriving file: sizes no page can hold are refused by name", "[format]") {
  ArrivingFile file("The model", "beginLoad");
  for (double bad :
       {0.0, -1.0, std::nan(""), 5e9, 1e300, std::numeric_limits<double>::infinity()}) {
    INFO(bad);
    REQUIRE_THROWS_WITH(file.Begin(bad),
                        Contains("The model (") && Contains("is not something this page can load"));
    REQUIRE(file.data() == nullptr);
  }
}

TEST_CASE("arriving file: chunks land in order, and a wrong count is an error", "[format]") {
  ArrivingFile file("model.safetensors", "beginCheckpoint");
  REQUIRE_THROWS_WITH(file.Append(1), Contains("appendChunk called before beginCheckpoint"));
  REQUIRE_THROWS_WITH(file.RequireComplete(), Contains("beginCheckpoint was not called"));

  std::vector<uint8_t> bytes(1000);
  std::iota(bytes.begin(), bytes.end(), uint8_t{7});
  file.Begin(static_cast<double>(bytes.size()));
  REQUIRE(reinterpret_cast<uintptr_t>(file.data()) % 64 == 0);
  std::memcpy(file.Append(600), bytes.data(), 600);
  REQUIRE_THROWS_WITH(file.Append(401), Contains("larger than announced (1000 bytes)"));
  REQUIRE_THROWS_WITH(file.RequireComplete(), Contains("incomplete: received 600 of 1000 bytes"));
  std::memcpy(file.Append(400), bytes.data() + 600, 400);
  REQUIRE_NOTHROW(file.RequireComplete());
  REQUIRE(file.size() == bytes.size());
  REQUIRE(std::memcmp(file.data(), bytes.data(), bytes.size()) == 0);

  // A new Begin drops the old file: nothing of it is counted.
  file.Begin(10);
  REQUIRE(file.filled() == 0);
  REQUIRE_THROWS_WITH(file.RequireComplete(), Contains("received 0 of 10"));
  file.Free();
  REQUIRE(file.data() == nullptr);
}

}  // namespace
