// `gpt2 compare --model A.gguf --model-b B.gguf --prompt P [--json FILE] [--threads N]`: the
// quantization lens (lab/compare.h). Prints per block `L<TAB>cos<TAB>rel<TAB>kl`, then
// `top1<TAB>agree/positions`. The prompt is tokenized with A's tokenizer; both files must have
// the same shape and tokens (else exit status 2). Both run as the page runs them (int8 activations
// for Q8_0/Q4_0 weights). --json FILE writes
//   { "ids": [..], "positions": T,
//     "blocks": [ {"layer": l, "cos": c, "rel": r, "kl": k}, ... ],
//     "top1": {"agree": n, "positions": T, "a": [ids], "b": [ids]} }
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "format/gguf.h"
#include "lab/compare.h"
#include "model/session.h"
#include "tokenizer/tokenizer.h"
#include "tools/cli/args.h"
#include "tools/cli/json_out.h"
#include "tools/common/intervention_flags.h"

namespace gpt2 {

namespace {

struct OpenModel {
  std::unique_ptr<MappedFile> mapping;
  std::shared_ptr<const GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

OpenModel Open(const std::string& path) {
  OpenModel m;
  m.mapping = MappedFile::Open(path);
  m.file = GgufFile::Parse(m.mapping->data(), m.mapping->size());
  m.model = Model::FromGguf(m.file);
  m.tokenizer = Tokenizer::FromGguf(*m.file);
  return m;
}

void WriteCompareJson(const std::string& path, const std::vector<int>& ids, const Comparison& r) {
  WriteJsonFile(path, [&](std::ostream& out) {
    out << "{\"ids\":";
    JsonArray(out, ids);
    out << ",\"positions\":" << r.positions << ",\"blocks\":[";
    for (size_t l = 0; l < r.blocks.size(); ++l) {
      out << (l ? "," : "") << "{\"layer\":" << l << ",\"cos\":";
      JsonNumber(out, r.blocks[l].cos);
      out << ",\"rel\":";
      JsonNumber(out, r.blocks[l].rel);
      out << ",\"kl\":";
      JsonNumber(out, r.blocks[l].kl);
      out << "}";
    }
    out << "],\"top1\":{\"agree\":" << r.agree << ",\"positions\":" << r.positions << ",\"a\":";
    JsonArray(out, r.top_a);
    out << ",\"b\":";
    JsonArray(out, r.top_b);
    out << "}}\n";
  });
}

}  // namespace

int CompareCommand(int argc, char** argv) {
  Args args = [&] {
    try {
      return Args(argc, argv, 2, {"model", "model-b", "prompt", "json", "threads"});
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }();
  for (const char* flag : {"model", "model-b", "prompt"}) {
    if (!args.Has(flag)) throw UsageError(std::string("compare needs --") + flag);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  const long long threads = args.GetInt("threads", hw == 0 ? 1 : hw);
  if (threads < 1) throw UsageError("--threads must be >= 1");

  OpenModel a = Open(args.Get("model"));
  OpenModel b = Open(args.Get("model-b"));
  try {
    CheckSameShape(a.model->config(), b.model->config());
    CheckSameVocabulary(*a.tokenizer, *b.tokenizer);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  const std::vector<int> ids = a.tokenizer->Encode(args.Get("prompt"));
  if (ids.empty()) throw UsageError("the prompt is empty");
  if (static_cast<int>(ids.size()) > a.model->config().n_ctx) {
    throw UsageError("the prompt is " + std::to_string(ids.size()) +
                     " tokens, longer than the context of " +
                     std::to_string(a.model->config().n_ctx));
  }
  Session session_a(*a.model, static_cast<int>(threads));
  Session session_b(*b.model, static_cast<int>(threads));
  const Comparison r = CompareModels(session_a, session_b, ids);
  for (size_t l = 0; l < r.blocks.size(); ++l) {
    std::printf("%zu\t%.7g\t%.7g\t%.7g\n", l, r.blocks[l].cos, r.blocks[l].rel, r.blocks[l].kl);
  }
  std::printf("top1\t%d/%d\n", r.agree, r.positions);
  if (args.Has("json")) WriteCompareJson(args.Get("json"), ids, r);
  return 0;
}

}  // namespace gpt2
