// gpt2 dashboard --model M (--transcoders T.gguf | --sae S.gguf) --corpus FILE [--blocks L,...]
//   [--features L_F,...] [--context N] [--max-tokens M] [--top K] [--bands B] [--per-band S]
//   [--seed X] [--json OUT] [--threads N] [--activations int8|f32|fastest]
// Feature dashboards over a corpus (.txt or .jsonl, lab/corpus.h), as lab/dashboard.h computes
// them: by default every feature of every block the dictionary has (--blocks: those blocks'
// features; --features: those features alone), windows of 128 tokens, the top 20 windows and 5
// bands of 5. --json writes lab/dashboard_json.h's file (Neuronpedia's keys); without it, per
// feature one line:
//   L_F<TAB>frac_nonzero<TAB>max<TAB>top windows (number:max, ...)<TAB>promoted tokens
// The last line of stdout, for scripts/bench.sh:
//   dashboard: F features, W windows, T tokens: windows X ms, features Y ms (cpu X' ms, Y' ms),
//   state peak Z MB
// (cpu: the process's CPU time, which a shared machine's other work does not stretch).
#include "tools/cli/dashboard_cmd.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "format/gguf.h"
#include "lab/dashboard.h"
#include "lab/dashboard_json.h"
#include "lab/lab.h"
#include "sae/transcoders.h"
#include "tools/cli/json_out.h"
#include "tools/common/intervention_flags.h"

namespace gpt2 {

namespace {

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> items;
  for (size_t begin = 0; begin <= list.size();) {
    const size_t end = std::min(list.find(',', begin), list.size());
    items.push_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

int ParseCount(const std::string& flag, const std::string& text) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (...) {
    used = 0;
  }
  if (used != text.size() || text.empty() || v < 0 || v > (1 << 30))
    throw UsageError("--" + flag + ": '" + text + "' is not a block or feature number");
  return static_cast<int>(v);
}

// The blocks and features asked for, as DashboardBlocks of the dictionary's blocks `have`.
// The blocks and features the flags name, as lab/dashboard.h SelectDashboardBlocks takes them.
std::vector<DashboardBlock> Selection(const Args& args, const std::map<int, const Sae*>& have) {
  std::vector<int> blocks;
  if (args.Has("blocks")) {
    for (const std::string& item : SplitList(args.Get("blocks")))
      blocks.push_back(ParseCount("blocks", item));
  }
  std::vector<std::pair<int, int>> features;
  if (args.Has("features")) {
    for (const std::string& item : SplitList(args.Get("features"))) {
      const size_t bar = item.find('_');
      if (bar == std::string::npos)
        throw UsageError("--features: '" + item + "' is not LAYER_FEATURE (e.g. 3_1234)");
      features.emplace_back(ParseCount("features", item.substr(0, bar)),
                            ParseCount("features", item.substr(bar + 1)));
    }
  }
  try {
    return SelectDashboardBlocks(have, blocks, features);
  } catch (const Error& e) {
    throw UsageError(std::string(args.Has("features") ? "--features: " : "--blocks: ") + e.what());
  }
}

std::string FileName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::set<std::string> DashboardFlags() {
  return {"model",    "transcoders", "sae",        "corpus",  "blocks",
          "features", "context",     "max-tokens", "top",     "bands",
          "per-band", "seed",        "json",       "threads", "activations"};
}

int DashboardCommand(const Args& args, QuantActivations activations, int n_threads) {
  for (const char* flag : {"model", "corpus"}) {
    if (!args.Has(flag)) throw UsageError(std::string("dashboard needs --") + flag);
  }
  if (args.Has("transcoders") == args.Has("sae"))
    throw UsageError("dashboard needs one dictionary: --transcoders T.gguf or --sae S.gguf");
  DashboardOptions options;
  try {
    options.context = static_cast<int>(args.GetInt("context", 128));
    options.max_tokens = args.GetInt("max-tokens", -1);
    options.top = static_cast<int>(args.GetInt("top", 20));
    options.bands = static_cast<int>(args.GetInt("bands", 5));
    options.per_band = static_cast<int>(args.GetInt("per-band", 5));
    options.seed = static_cast<uint64_t>(args.GetInt("seed", 0));
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (args.Has("max-tokens") && options.max_tokens < 1)
    throw UsageError("--max-tokens must be >= 1");
  if (n_threads < 1) throw UsageError("--threads must be >= 1");
  const std::string corpus_path = args.Get("corpus");
  CorpusFormat format;
  try {
    format = CorpusFormatOf(corpus_path);
  } catch (const Error& e) {
    throw UsageError(std::string("--corpus: ") + e.what());
  }

  const std::unique_ptr<MappedFile> mapping = MappedFile::Open(args.Get("model"));
  const LoadedGguf loaded = LoadGguf(mapping->data(), mapping->size());
  const Model& model = *loaded.model;
  const Tokenizer& tokenizer = *loaded.tokenizer;
  std::shared_ptr<const TranscoderSet> transcoders;
  std::shared_ptr<const Sae> sae;
  std::map<int, const Sae*> have;
  try {
    if (args.Has("transcoders")) {
      transcoders = LoadTranscoderFile(args.Get("transcoders"), model.config());
      for (int l : transcoders->blocks()) have[l] = transcoders->block(l);
    } else {
      sae = LoadSaeFile(args.Get("sae"), model.config().n_embd);
      if (sae->config().layer >= model.config().n_layer) {
        throw Error("the SAE reads " + sae->config().hook_name + " but the model has blocks 0.." +
                    std::to_string(model.config().n_layer - 1));
      }
      have[sae->config().layer] = sae.get();
    }
  } catch (const Error& e) {
    throw UsageError(std::string(args.Has("sae") ? "--sae: " : "--transcoders: ") + e.what());
  }
  const std::vector<DashboardBlock> blocks = Selection(args, have);

  Session session(model, n_threads, activations);
  std::unique_ptr<DashboardJob> job;
  try {
    job = std::make_unique<DashboardJob>(session, tokenizer, blocks, options, format,
                                         FileName(corpus_path));
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  {
    std::ifstream in(corpus_path, std::ios::binary);
    if (!in) throw UsageError("--corpus: cannot open '" + corpus_path + "'");
    std::vector<char> chunk(size_t{1} << 20);
    while (in && !job->input_full()) {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      job->Feed(chunk.data(), static_cast<size_t>(in.gcount()));
    }
    if (in.bad()) throw Error("--corpus: cannot read '" + corpus_path + "'");
    job->EndInput();
  }
  if (job->n_tokens() == 0) throw UsageError("--corpus: '" + corpus_path + "' holds no text");

  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const std::clock_t c0 = std::clock();
  while (job->progress().phase == std::string("windows")) job->Continue();
  const auto t1 = Clock::now();
  const std::clock_t c1 = std::clock();

  // The features as they are finished, into the file or as lines.
  const auto finish = [&](DashboardJsonWriter* writer) {
    while (!job->done()) {
      job->Continue();
      for (const FeatureDashboard& f : job->TakeFeatures()) {
        if (writer != nullptr) {
          writer->Feature(f);
          continue;
        }
        std::printf("%d_%d\t%.6f\t%.6f\t", f.layer, f.index, f.frac_nonzero, f.max);
        for (int i = 0; i < f.n_top && i < 5; ++i)
          std::printf("%s%lld:%.4f", i ? ", " : "", static_cast<long long>(f.windows[i].window),
                      f.windows[i].max_value);
        std::printf("\t");
        for (size_t i = 0; i < f.promoted.size() && i < 5; ++i)
          std::printf("%s'%s'", i ? " " : "", DashboardTokenText(tokenizer, f.promoted[i]).c_str());
        std::printf("\n");
      }
    }
  };
  if (args.Has("json")) {
    DashboardMetadata m;
    m.model = FileName(args.Get("model"));
    m.dictionary = transcoders ? "transcoders" : "sae";
    m.corpus = FileName(corpus_path);
    m.context = options.context;
    m.n_windows = job->n_windows();
    m.n_tokens = job->n_tokens();
    WriteJsonFile(args.Get("json"), [&](std::ostream& out) {
      DashboardJsonWriter writer(out, m, tokenizer);
      finish(&writer);
      writer.End();
    });
  } else {
    finish(nullptr);
  }
  const auto t2 = Clock::now();
  const std::clock_t c2 = std::clock();
  const auto cpu_ms = [](std::clock_t d) { return 1000.0 * double(d) / CLOCKS_PER_SEC; };
  const auto ms = [](Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  std::printf(
      "dashboard: %d features, %lld windows, %lld tokens: windows %.0f ms, features %.0f ms "
      "(cpu %.0f ms, %.0f ms), state peak %.1f MB\n",
      job->n_features(), static_cast<long long>(job->n_windows()),
      static_cast<long long>(job->n_tokens()), ms(t1 - t0), ms(t2 - t1), cpu_ms(c1 - c0),
      cpu_ms(c2 - c1), job->peak_state_bytes() / 1e6);
  return 0;
}

}  // namespace gpt2
