// The one exception type the engine throws: bad model files, bad configs, bad requests (a prompt
// longer than the context). Messages are written for the person who will read them in the CLI or
// the page, and name the thing at fault (the tensor, the key, the offset).
// Hot loops never throw; only loading and request validation do.
#pragma once

#include <stdexcept>
#include <string>

namespace gpt2 {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace gpt2
