// A dashboard's file (lab/dashboard_json.h).
#include "lab/dashboard_json.h"

#include <sstream>
#include <vector>

#include "base/text.h"
#include "format/json.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

std::string DashboardTokenText(const Tokenizer& tokenizer, int id) {
  return ValidUtf8(tokenizer.TokenBytes(id));
}

DashboardJsonWriter::DashboardJsonWriter(std::ostream& out, const DashboardMetadata& m,
                                         const Tokenizer& tokenizer)
    : out_(out), tokenizer_(tokenizer), token_json_(tokenizer.vocab_size()) {
  out_ << "{\"metadata\":{\"model\":";
  JsonString(out_, m.model);
  out_ << ",\"dictionary\":";
  JsonString(out_, m.dictionary);
  out_ << ",\"corpus\":";
  JsonString(out_, m.corpus);
  out_ << ",\"context\":" << m.context << ",\"n_windows\":" << m.n_windows
       << ",\"n_tokens\":" << m.n_tokens << "},\"features\":[";
}

int DashboardJsonWriter::Feature(const FeatureDashboard& f) {
  const int separator = first_ ? 1 : 2;
  out_ << (first_ ? "\n" : ",\n");
  first_ = false;
  out_ << "{\"layer\":" << f.layer << ",\"index\":" << f.index << ",\"frac_nonzero\":";
  JsonNumber(out_, f.frac_nonzero);
  out_ << ",\"maxActApprox\":";
  JsonNumber(out_, f.max);
  out_ << ",\"pos_str\":";
  Strings(f.promoted);
  out_ << ",\"pos_values\":";
  JsonArray(out_, f.promoted_values);
  out_ << ",\"neg_str\":";
  Strings(f.suppressed);
  out_ << ",\"neg_values\":";
  JsonArray(out_, f.suppressed_values);
  out_ << ",\"freq_hist_data_bar_heights\":";
  JsonArray(out_, f.histogram);
  out_ << ",\"freq_hist_data_bar_values\":";
  JsonArray(out_, f.bin_centres);
  out_ << ",\"activations\":[";
  for (size_t i = 0; i < f.windows.size(); ++i) {
    const DashboardWindow& w = f.windows[i];
    out_ << (i ? ",{" : "{") << "\"tokens\":";
    Strings(w.ids);
    out_ << ",\"values\":";
    JsonArray(out_, w.values);
    out_ << ",\"maxValue\":";
    JsonNumber(out_, w.max_value);
    out_ << ",\"maxValueTokenIndex\":" << w.max_index << ",\"dataIndex\":" << w.window
         << ",\"binMin\":";
    JsonNumber(out_, w.bin_min);
    out_ << ",\"binMax\":";
    JsonNumber(out_, w.bin_max);
    out_ << ",\"binContains\":" << w.bin_contains << "}";
  }
  out_ << "]}";
  return separator;
}

void DashboardJsonWriter::Strings(const std::vector<int>& ids) {
  out_ << '[';
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out_ << ',';
    const int id = ids[i];
    if (id < 0 || id >= static_cast<int>(token_json_.size())) {
      JsonString(out_, DashboardTokenText(tokenizer_, id));
      continue;
    }
    std::string& text = token_json_[id];
    if (text.empty()) {  // a JSON string is never empty: it has its quotes
      std::ostringstream quoted;
      JsonString(quoted, DashboardTokenText(tokenizer_, id));
      text = quoted.str();
    }
    out_ << text;
  }
  out_ << ']';
}

void DashboardJsonWriter::End() { out_ << "\n]}\n"; }

}  // namespace gpt2
