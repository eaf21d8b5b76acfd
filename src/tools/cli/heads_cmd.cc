// `gpt2 heads --model M [--ids I1,I2,...,IR] [--json FILE] [--threads N]`: head detection
// (lab/head_scores.h). Prints one line per head, `L.H<TAB>prev<TAB>dup<TAB>induction`, blocks
// and heads in order. Without --ids the R = 50 ids are DefaultHeadIds' (SplitMix64, seed 2028).
// --json FILE writes
//   { "ids": [I1..IR], "sequence": [50256, I1..IR, I1..IR], "n_layer": L, "n_head": H,
//     "uniform": {"prev": u, "dup": u, "induction": u},
//     "heads": [ {"layer": l, "head": h, "prev": s, "dup": s, "induction": s}, ... ] }
// The lab runs the page's arithmetic (int8 activations for Q8_0/Q4_0 weights), so the page's
// heads grid shows these numbers. Bad flags or ids: exit status 2.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "format/gguf.h"
#include "lab/head_scores.h"
#include "lab/lab.h"
#include "tools/cli/args.h"
#include "tools/cli/json_out.h"
#include "tools/common/intervention_flags.h"

namespace gpt2 {

namespace {

std::vector<int> ParseIds(const std::string& text) {
  std::vector<int> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string part =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(part, &used);
    } catch (...) {
      used = 0;
    }
    if (part.empty() || used != part.size() || v < 0 || v > 0x7fffffff) {
      throw UsageError("--ids: '" + part + "' is not a token id (a list like 464,2068,7586)");
    }
    ids.push_back(static_cast<int>(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

void WriteHeadsJson(const std::string& path, const std::vector<int>& ids, const HeadScores& s) {
  const UniformScores u = UniformHeadScores(s.repeat);
  WriteJsonFile(path, [&](std::ostream& out) {
    out << "{\"ids\":";
    JsonArray(out, ids);
    out << ",\"sequence\":";
    JsonArray(out, RepeatedSequence(ids));
    out << ",\"n_layer\":" << s.n_layer << ",\"n_head\":" << s.n_head << ",\"uniform\":{\"prev\":";
    JsonNumber(out, u.prev);
    out << ",\"dup\":";
    JsonNumber(out, u.dup);
    out << ",\"induction\":";
    JsonNumber(out, u.induction);
    out << "},\"heads\":[";
    for (int l = 0; l < s.n_layer; ++l) {
      for (int h = 0; h < s.n_head; ++h) {
        const size_t i = size_t(l) * s.n_head + h;
        out << (i ? "," : "") << "{\"layer\":" << l << ",\"head\":" << h << ",\"prev\":";
        JsonNumber(out, s.prev[i]);
        out << ",\"dup\":";
        JsonNumber(out, s.dup[i]);
        out << ",\"induction\":";
        JsonNumber(out, s.induction[i]);
        out << "}";
      }
    }
    out << "]}\n";
  });
}

}  // namespace

int HeadsCommand(int argc, char** argv) {
  Args args = [&] {
    try {
      return Args(argc, argv, 2, {"model", "ids", "json", "threads"});
    } catch (const UsageError&) {
      throw;
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }();
  if (!args.Has("model")) throw UsageError("heads needs --model M.gguf");
  const unsigned hw = std::thread::hardware_concurrency();
  const long long threads = args.GetInt("threads", hw == 0 ? 1 : hw);
  if (threads < 1) throw UsageError("--threads must be >= 1");
  std::vector<int> ids;
  if (args.Has("ids")) ids = ParseIds(args.Get("ids"));

  const std::unique_ptr<MappedFile> mapping = MappedFile::Open(args.Get("model"));
  LoadedGguf loaded;  // no tokenizer: the command takes ids
  loaded.file = GgufFile::Parse(mapping->data(), mapping->size());
  loaded.model = Model::FromGguf(loaded.file);
  Lab lab(std::move(loaded), static_cast<int>(threads));
  if (!args.Has("ids")) ids = DefaultHeadIds(lab.config().n_vocab);

  HeadScores s;
  try {
    s = DetectHeads(lab.conv(), ids);
  } catch (const Error& e) {
    // The lab checks the ids against the model before it runs anything: the caller's input.
    throw UsageError(e.what());
  }
  for (int l = 0; l < s.n_layer; ++l) {
    for (int h = 0; h < s.n_head; ++h) {
      const size_t i = size_t(l) * s.n_head + h;
      std::printf("%d.%d\t%.6f\t%.6f\t%.6f\n", l, h, s.prev[i], s.dup[i], s.induction[i]);
    }
  }
  if (args.Has("json")) WriteHeadsJson(args.Get("json"), ids, s);
  return 0;
}

}  // namespace gpt2
