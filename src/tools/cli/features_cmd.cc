// gpt2 features --model M --sae S.gguf --prompt P [--top K] [--bos] [--json FILE] [--threads N]
//   For each prompt position in order, its K (default 5) most active features of the SAE at its
//   hook, in descending activation, one line each: p<TAB>feature<TAB>activation; features at 0
//   are not printed. --bos puts <|endoftext|> (50256) before the prompt (SAELens trains with it)
//   and counts it as position 0. --json FILE writes
//   {"hook": "blocks.L.hook_...", "d_sae": S, "ids": [...],
//    "positions": [{"position": p, "features": [...], "activations": [...], "explained": x}, ...]}
//   with explained = 1 - |x - x_hat|^2 / |x|^2 (sae/sae.h). The lab runs the page's arithmetic.
#include "tools/cli/features_cmd.h"

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "format/gguf.h"
#include "lab/lab.h"
#include "tools/cli/args.h"
#include "tools/cli/json_out.h"
#include "tools/common/intervention_flags.h"

namespace gpt2 {

int FeaturesCommand(int argc, char** argv) {
  const Args args = [&] {
    try {
      return Args(argc, argv, 2, {"model", "sae", "prompt", "top", "bos", "json", "threads"},
                  {"bos"});
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }();
  for (const char* flag : {"model", "sae", "prompt"}) {
    if (!args.Has(flag)) throw UsageError(std::string("features needs --") + flag);
  }
  long long top = 0, threads = 0;
  try {
    top = args.GetInt("top", 5);
    const unsigned hw = std::thread::hardware_concurrency();
    threads = args.GetInt("threads", hw == 0 ? 1 : hw);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (top < 1) throw UsageError("--top must be >= 1");
  if (threads < 1) throw UsageError("--threads must be >= 1");

  const std::unique_ptr<MappedFile> mapping = MappedFile::Open(args.Get("model"));
  Lab lab(LoadGguf(mapping->data(), mapping->size()), static_cast<int>(threads));
  std::vector<int> ids;
  if (args.Has("bos")) ids.push_back(kEndOfText);
  const std::vector<int> prompt = lab.tokenizer().Encode(args.Get("prompt"));
  ids.insert(ids.end(), prompt.begin(), prompt.end());
  if (prompt.empty()) throw UsageError("--prompt: the prompt is empty");
  if (static_cast<int>(ids.size()) > lab.config().n_ctx) {
    throw UsageError("--prompt: " + std::to_string(ids.size()) +
                     " tokens, but the model's context holds " +
                     std::to_string(lab.config().n_ctx));
  }
  int id = 0;
  try {
    const std::unique_ptr<MappedFile> sae_file = MappedFile::Open(args.Get("sae"));
    id = lab.LoadSae(std::vector<uint8_t>(sae_file->data(), sae_file->data() + sae_file->size()));
  } catch (const Error& e) {
    throw UsageError(std::string("--sae: ") + e.what());
  }
  lab.SetCapture(true);
  lab.Run(ids);

  std::vector<SaeFeatureList> lists;
  for (int p = 0; p < static_cast<int>(ids.size()); ++p) {
    lists.push_back(lab.SaeFeatures(id, p, static_cast<int>(top)));
    const SaeFeatureList& f = lists.back();
    for (size_t i = 0; i < f.features.size(); ++i)
      std::printf("%d\t%d\t%.6f\n", p, f.features[i], f.activations[i]);
  }
  if (args.Has("json")) {
    WriteJsonFile(args.Get("json"), [&](std::ostream& out) {
      out << "{\"hook\":";
      JsonString(out, lab.sae(id).config().hook_name);
      out << ",\"d_sae\":" << lab.sae(id).d_sae() << ",\"ids\":";
      JsonArray(out, ids);
      out << ",\"positions\":[";
      for (size_t p = 0; p < lists.size(); ++p) {
        out << (p ? ",{" : "{") << "\"position\":" << p << ",\"features\":";
        JsonArray(out, lists[p].features);
        out << ",\"activations\":";
        JsonArray(out, lists[p].activations);
        out << ",\"explained\":";
        JsonNumber(out, lists[p].explained);
        out << "}";
      }
      out << "]}\n";
    });
  }
  return 0;
}

}  // namespace gpt2
