// JsonNumber writes what printf's "%.9g" writes (its shortcut for whole numbers included), and
// "null" for what JSON cannot hold.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "format/json.h"

namespace {

std::string Written(double v) {
  std::ostringstream out;
  gpt2::JsonNumber(out, v);
  return out.str();
}

std::string Printf(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

TEST_CASE("JsonNumber is printf's %.9g", "[json]") {
  std::vector<double> values = {
      0.0,        -0.0,      1,   -1,   2,       10,         100,       123456789,
      -123456789, 999999999, 1e9, -1e9, 1e9 + 1, 1234567890, 1e15,      4503599627370496.0,
      0.5,        -0.5,      1.5, 0.1,  1e-7,    3.0000001,  99999999.5};
  values.push_back(std::numeric_limits<double>::denorm_min());
  values.push_back(std::numeric_limits<double>::max());
  values.push_back(std::numeric_limits<float>::max());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-20.0f, 20.0f);
  for (int i = 0; i < 2000; ++i) values.push_back(uniform(rng));
  for (int i = -40; i <= 40; ++i) values.push_back(std::ldexp(1.0, i));
  for (double v : values) {
    INFO(Printf(v));
    CHECK(Written(v) == Printf(v));
  }
  CHECK(Written(std::nan("")) == "null");
  CHECK(Written(std::numeric_limits<double>::infinity()) == "null");
  CHECK(Written(-std::numeric_limits<double>::infinity()) == "null");
}
