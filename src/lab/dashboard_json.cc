// A dashboard's file (lab/dashboard_json.h).
#include "lab/dashboard_json.h"

#include <vector>

#include "base/text.h"
#include "format/json.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

namespace {

void Strings(std::ostream& out, const Tokenizer& tokenizer, const std::vector<int>& ids) {
  out << '[';
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out << ',';
    JsonString(out, DashboardTokenText(tokenizer, ids[i]));
  }
  out << ']';
}

}  // namespace

std::string DashboardTokenText(const Tokenizer& tokenizer, int id) {
  return ValidUtf8(tokenizer.TokenBytes(id));
}

DashboardJsonWriter::DashboardJsonWriter(std::ostream& out, const DashboardMetadata& m,
                                         const Tokenizer& tokenizer)
    : out_(out), tokenizer_(tokenizer) {
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
  Strings(out_, tokenizer_, f.promoted);
  out_ << ",\"pos_values\":";
  JsonArray(out_, f.promoted_values);
  out_ << ",\"neg_str\":";
  Strings(out_, tokenizer_, f.suppressed);
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
    Strings(out_, tokenizer_, w.ids);
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

void DashboardJsonWriter::End() { out_ << "\n]}\n"; }

}  // namespace gpt2
