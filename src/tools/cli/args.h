// Minimal `--flag value` parsing for the CLI: every flag takes one value except the switches
// named when parsing; unknown flags are errors so typos don't silently change a run.
#pragma once

#include <map>
#include <set>
#include <string>

#include "base/error.h"

namespace gpt2 {

class Args {
 public:
  Args(int argc, char** argv, int first, const std::set<std::string>& known,
       const std::set<std::string>& switches = {}) {
    for (int i = first; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag.rfind("--", 0) != 0 || !known.count(flag.substr(2))) {
        throw Error("unknown argument '" + flag + "'");
      }
      const std::string name = flag.substr(2);
      if (switches.count(name)) {
        values_[name] = "1";
        continue;
      }
      if (i + 1 >= argc) throw Error("'" + flag + "' needs a value");
      values_[name] = argv[++i];
    }
  }
  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  std::string Get(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) throw Error("missing --" + name);
    return it->second;
  }
  std::string Get(const std::string& name, const std::string& fallback) const {
    return Has(name) ? Get(name) : fallback;
  }
  long long GetInt(const std::string& name, long long fallback) const {
    if (!Has(name)) return fallback;
    const std::string v = Get(name);
    size_t used = 0;
    long long out = 0;
    try {
      out = std::stoll(v, &used);
    } catch (...) {
      used = 0;
    }
    if (used != v.size() || v.empty())
      throw Error("--" + name + " expects an integer, got '" + v + "'");
    return out;
  }
  double GetFloat(const std::string& name, double fallback) const {
    if (!Has(name)) return fallback;
    const std::string v = Get(name);
    size_t used = 0;
    double out = 0;
    try {
      out = std::stod(v, &used);
    } catch (...) {
      used = 0;
    }
    if (used != v.size() || v.empty())
      throw Error("--" + name + " expects a number, got '" + v + "'");
    return out;
  }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace gpt2
