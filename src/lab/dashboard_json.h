// A dashboard's file (issue 50): Neuronpedia's export's keys, so the page opens either file.
//   {"metadata": {"model", "dictionary": "transcoders" | "sae", "corpus", "context",
//                 "n_windows", "n_tokens"},
//    "features": [{"layer", "index", "frac_nonzero", "maxActApprox",
//                  "pos_str", "pos_values", "neg_str", "neg_values",
//                  "freq_hist_data_bar_heights", "freq_hist_data_bar_values" (the bins' centres),
//                  "activations": [{"tokens", "values", "maxValue", "maxValueTokenIndex",
//                                   "dataIndex", "binMin", "binMax", "binContains"}, ...]}, ...]}
// "activations" lists the top windows first, then the bands' from the lowest band up
// (lab/dashboard.h); a token's text is the decode of that one token made valid UTF-8 (a byte
// that is part of a character becomes U+FFFD, as Hugging Face's tokenizers show it).
// Written a feature at a time, so every block's dashboards never sit in memory whole.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "lab/dashboard.h"

namespace gpt2 {

class Tokenizer;

struct DashboardMetadata {
  std::string model, dictionary, corpus;
  int context = 0;
  int64_t n_windows = 0, n_tokens = 0;
};

class DashboardJsonWriter {
 public:
  // Writes the metadata and opens the feature list.
  DashboardJsonWriter(std::ostream& out, const DashboardMetadata& metadata,
                      const Tokenizer& tokenizer);
  // Writes f; returns how many bytes of what it wrote come before f's object (the separator).
  int Feature(const FeatureDashboard& f);
  void End();  // closes the document

 private:
  void Strings(const std::vector<int>& ids);

  std::ostream& out_;
  const Tokenizer& tokenizer_;
  // Each token's JSON string, made when first written: a block's windows over 100 k tokens
  // write ~140 M tokens, from a vocabulary of 50,257.
  std::vector<std::string> token_json_;
  bool first_ = true;
};

// A token's text as the file writes it.
std::string DashboardTokenText(const Tokenizer& tokenizer, int id);

}  // namespace gpt2
