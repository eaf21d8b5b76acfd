// build/native/gpt2: generate, tokenize, info, inspect, bench. See `gpt2 help`.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/text.h"
#include "format/gguf.h"
#include "kernels/kernels.h"
#include "model/acts.h"
#include "model/attribution.h"
#include "model/generate.h"
#include "model/sampler.h"
#include "model/session.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8_stream.h"
#include "tools/cli/args.h"
#include "tools/cli/dashboard_cmd.h"
#include "tools/cli/features_cmd.h"
#include "tools/cli/gradients_cmd.h"
#include "tools/cli/graph_cmd.h"
#include "tools/cli/inspect_json.h"
#include "tools/cli/json_out.h"
#include "tools/cli/path_patch_cmd.h"
#include "tools/common/intervention_flags.h"

namespace gpt2 {
int HeadsCommand(int argc, char** argv);    // heads_cmd.cc
int CompareCommand(int argc, char** argv);  // compare_cmd.cc
namespace {

constexpr char kUsage[] =
    "usage:\n"
    "  gpt2 generate --model M.gguf --prompt TEXT [--n N] [--temp T] [--top-k K] [--top-p P]\n"
    "                [--seed S] [--threads N] [--print-ids] [INTERVENTIONS]\n"
    "  gpt2 tokenize (--model M.gguf | --vocab encoder.json --merges vocab.bpe)\n"
    "                (--text TEXT | --file F)\n"
    "  gpt2 info --model M.gguf\n"
    "  gpt2 inspect --model M.gguf --prompt TEXT --json OUT [--top-k K] [INTERVENTIONS]\n"
    "  gpt2 attribute --model M.gguf --prompt TEXT [--target ID] [--contrast ID] [--position N]\n"
    "                [--json FILE] [--threads N] [INTERVENTIONS]\n"
    "  gpt2 path-patch --model M.gguf --clean TEXT --corrupt TEXT (--sender L.H | --sweep)\n"
    "                [--receivers logits|L.H.q|k|v[,...]] [--target ID] [--contrast ID] [--threads "
    "N]\n"
    "  gpt2 bench --model M.gguf [--prompt-tokens 128] [--decode-tokens 64] [--threads N]\n"
    "             [INTERVENTIONS: also time a re-run under them reusing the cache]\n"
    "  gpt2 heads --model M.gguf [--ids I1,I2,...,IR] [--json FILE] [--threads N]\n"
    "                every head's prev, dup and induction score on [50256, I1..IR, I1..IR];\n"
    "                without --ids R = 50 distinct ids: SplitMix64 seeded 2028, id = next %\n"
    "                (n_vocab - 1), repeats skipped (lab/head_scores.h)\n"
    "  gpt2 compare --model A.gguf --model-b B.gguf --prompt TEXT [--json FILE] [--threads N]\n"
    "                per block L<TAB>cos<TAB>rel<TAB>kl of B against A, then "
    "top1<TAB>agree/positions\n"
    "  gpt2 saliency --model M.gguf --prompt TEXT [--target ID] [--contrast ID] [--position N]\n"
    "                [--method grad|ig] [--steps K] [--json FILE] [--threads N] [INTERVENTIONS]\n"
    "  gpt2 atp --model M.gguf --clean TEXT --corrupt TEXT [--target ID] [--contrast ID]\n"
    "           [--json FILE] [--threads N] [INTERVENTIONS]\n"
    "  gpt2 features --model M.gguf --sae S.gguf --prompt TEXT [--top K] [--bos] [--json FILE]\n"
    "                [--threads N]   per position p<TAB>feature<TAB>activation, K most active\n"
    "  gpt2 graph --model M.gguf --transcoders T.gguf --prompt TEXT [--target ID] [--no-prune]\n"
    "             [--node-threshold X] [--edge-threshold Y] [--max-feature-nodes N] [--json FILE]\n"
    "             [--threads N]   attribution graph of [50256] + TEXT (circuit-tracer's JSON)\n"
    "             [--check NODE_ID[,NODE_ID...] [--clamp V]]   those feature nodes ablated (or\n"
    "                clamped to V): the graph's predicted and the re-run's exact change of the\n"
    "                top logit (logit - mean logit)\n"
    "  gpt2 dashboard --model M.gguf (--transcoders T.gguf | --sae S.gguf) --corpus FILE\n"
    "             [--blocks L,...] [--features L_F,...] [--context N] [--max-tokens M] [--top K]\n"
    "             [--bands B] [--per-band S] [--seed X] [--json OUT] [--threads N]\n"
    "                feature dashboards over a .txt (<|endoftext|> lines between documents) or\n"
    "                .jsonl ({\"text\": ...} lines) corpus: top windows, bands, histogram,\n"
    "                logit tables (Neuronpedia's JSON with --json)\n"
    "INTERVENTIONS (combine freely; layers and heads count from 0):\n"
    "  --ablate-heads L.H[,L.H...]  zero the heads' outputs before the output projection\n"
    "  --skip-attn L[,L...]         the blocks' attention adds nothing to the stream\n"
    "  --skip-mlp L[,L...]          the blocks' MLP adds nothing to the stream\n"
    "  --no-residual L[,L...]       x = attn(ln_1(x)); x = mlp(ln_2(x)) in those blocks\n"
    "  --post-norm                  x = ln_1(x + attn(x)); x = ln_2(x + mlp(x)) in every block\n"
    "  --sae S.gguf --steer F:ALPHA[,F:ALPHA...]   add ALPHA * W_dec[F] at the SAE's hook\n"
    "  --sae S.gguf --clamp F:VALUE[,F:VALUE...]   set feature F to VALUE there (keeping the "
    "error)\n"
    "generate, inspect, attribute, bench, saliency, atp and dashboard also take\n"
    "  --activations int8|f32|fastest  how products with Q8_0/Q4_0 weights take their input:\n"
    "                               int8 as llama.cpp and the page do (the same numbers there),\n"
    "                               f32, or whichever is faster on this CPU (default: fastest)\n";

// A command's flags plus the intervention flags.
std::set<std::string> WithInterventionFlags(std::set<std::string> flags) {
  for (const char* f : kInterventionFlags) flags.insert(f);
  return flags;
}

// A model file mapped into memory with everything bound to it; members are destroyed in
// reverse order, so the mapping outlives the views into it.
struct LoadedModel {
  std::unique_ptr<MappedFile> mapping;
  std::shared_ptr<const GgufFile> gguf;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;  // null when the file has none and none is needed
};

LoadedModel Load(const std::string& path, bool need_tokenizer) {
  LoadedModel m;
  m.mapping = MappedFile::Open(path);
  m.gguf = GgufFile::Parse(m.mapping->data(), m.mapping->size());
  m.model = Model::FromGguf(m.gguf);
  if (need_tokenizer) m.tokenizer = Tokenizer::FromGguf(*m.gguf);
  return m;
}

int DefaultThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

SamplingParams SamplingFromArgs(const Args& args) {
  SamplingParams p;
  p.temperature = static_cast<float>(args.GetFloat("temp", 1.0));
  p.top_k = static_cast<int>(args.GetInt("top-k", 0));
  p.top_p = static_cast<float>(args.GetFloat("top-p", 1.0));
  p.seed = static_cast<uint64_t>(args.GetInt("seed", 0));
  if (p.temperature < 0) throw Error("--temp must be >= 0");
  if (p.top_k < 0) throw Error("--top-k must be >= 0");
  if (!(p.top_p > 0 && p.top_p <= 1)) throw Error("--top-p must be in (0, 1]");
  return p;
}

// --activations (kernels.h QuantActivations). The default is the fastest; the tests that compare
// the CLI with the page, which always runs int8, ask for int8.
QuantActivations ActivationsArg(const Args& args) {
  const std::string v = args.Get("activations", "fastest");
  if (v == "int8") return QuantActivations::kInt8;
  if (v == "f32") return QuantActivations::kFloat;
  if (v == "fastest") return QuantActivations::kFastest;
  throw UsageError("--activations must be int8, f32 or fastest, got '" + v + "'");
}

int Generate(const Args& args) {
  const QuantActivations activations = ActivationsArg(args);
  LoadedModel m = Load(args.Get("model"), true);
  Session session(*m.model, static_cast<int>(args.GetInt("threads", DefaultThreads())),
                  activations);
  const std::vector<int> prompt = m.tokenizer->Encode(args.Get("prompt"));
  if (prompt.empty()) throw Error("the prompt is empty");
  // Checked before the prompt is echoed, so the error is not buried under it.
  if (static_cast<int>(prompt.size()) > m.model->config().n_ctx) {
    throw Error("the prompt is too long for the model: " + std::to_string(prompt.size()) +
                " tokens, but its context holds " + std::to_string(m.model->config().n_ctx));
  }
  const Interventions interventions = InterventionsFromArgs(args, m.model->config());
  GenerateOptions options;
  options.run.interventions = &interventions;
  options.sampling = SamplingFromArgs(args);
  options.max_tokens = static_cast<int>(args.GetInt("n", 32));
  if (options.max_tokens < 0) throw Error("--n must be >= 0");

  std::vector<int> sampled;
  Utf8Stream stream;
  std::cout << args.Get("prompt") << std::flush;
  const StopReason reason = options.max_tokens == 0
                                ? StopReason::kMaxTokens
                                : gpt2::Generate(session, prompt, options, [&](int id) {
                                    sampled.push_back(id);
                                    if (id != kEndOfText) {
                                      std::cout << stream.Push(m.tokenizer->TokenBytes(id))
                                                << std::flush;
                                    }
                                    return true;
                                  });
  std::cout << stream.Flush() << "\n";
  if (reason == StopReason::kContextFull) {
    std::cerr << "gpt2: stopped early: the context of " << m.model->config().n_ctx
              << " tokens is full\n";
  }
  if (args.Has("print-ids")) {
    for (size_t i = 0; i < sampled.size(); ++i) std::cout << (i ? " " : "") << sampled[i];
    std::cout << "\n";
  }
  return 0;
}

int Tokenize(const Args& args) {
  std::unique_ptr<Tokenizer> tokenizer;
  LoadedModel m;
  if (args.Has("model")) {
    m.mapping = MappedFile::Open(args.Get("model"));
    m.gguf = GgufFile::Parse(m.mapping->data(), m.mapping->size());
    tokenizer = Tokenizer::FromGguf(*m.gguf);
  } else if (args.Has("vocab") && args.Has("merges")) {
    tokenizer = Tokenizer::FromFiles(args.Get("vocab"), args.Get("merges"));
  } else {
    throw Error("tokenize needs --model, or --vocab and --merges");
  }
  std::string text;
  if (args.Has("text"))
    text = args.Get("text");
  else if (args.Has("file"))
    text = ReadWholeFile(args.Get("file"), "input file");
  else
    throw Error("tokenize needs --text or --file");
  const std::vector<int> ids = tokenizer->Encode(text);
  for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
  std::cout << "\n";
  return 0;
}

std::string WithCommas(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(i, ",");
  return s;
}

int Info(const Args& args) {
  LoadedModel m = Load(args.Get("model"), false);
  const Config& c = m.model->config();
  const GgufFile& f = *m.gguf;
  std::cout << "file: " << args.Get("model") << " (GGUF v" << f.version() << ", "
            << f.tensors().size() << " tensors, " << f.metadata().size() << " metadata keys)\n";
  std::cout << "architecture: gpt2\n"
            << "n_vocab: " << c.n_vocab << "\nn_ctx: " << c.n_ctx << "\nn_embd: " << c.n_embd
            << "\nn_head: " << c.n_head << "\nhead_dim: " << c.head_dim()
            << "\nn_layer: " << c.n_layer << "\nn_ff: " << c.n_ff
            << "\nlayer_norm_epsilon: " << c.ln_eps << "\n";
  std::map<std::string, std::pair<int, int64_t>> by_type;  // type -> (tensors, bytes)
  for (const GgufTensor& t : f.tensors()) {
    auto& e = by_type[GgmlTypeName(static_cast<uint32_t>(t.type))];
    e.first += 1;
    e.second += static_cast<int64_t>(t.nbytes);
  }
  std::cout << "tensor types:";
  for (const auto& e : by_type) {
    std::cout << " " << e.first << " x" << e.second.first << " (" << WithCommas(e.second.second)
              << " bytes)";
  }
  std::cout << "\nmatrix types: qkv " << GgmlTypeName(uint32_t(m.model->blocks[0].qkv.type))
            << ", token_embd " << GgmlTypeName(uint32_t(m.model->token_embedding.type))
            << ", output " << (f.FindTensor("output.weight") ? "separate" : "tied to token_embd")
            << "\n";
  std::cout << "parameters per block: " << WithCommas(m.model->BlockParameterCount()) << "\n";
  std::cout << "parameters total: " << WithCommas(m.model->ParameterCount()) << "\n";
  std::printf("forward FLOPs per token: %.3f GFLOP (matmuls incl. unembedding, at position 0)\n",
              m.model->ForwardFlopsPerToken() / 1e9);
  std::cout << "kernel target: " << ActiveKernelTargetName() << "\n";
  return 0;
}

int Inspect(const Args& args) {
  const QuantActivations activations = ActivationsArg(args);
  LoadedModel m = Load(args.Get("model"), true);
  Session session(*m.model, static_cast<int>(args.GetInt("threads", DefaultThreads())),
                  activations);
  const std::vector<int> ids = m.tokenizer->Encode(args.Get("prompt"));
  if (ids.empty()) throw Error("the prompt is empty");
  const Interventions interventions = InterventionsFromArgs(args, m.model->config());
  Recorder recorder;
  RunOptions run;
  run.observer = [&](const Activation& a) { recorder.Record(a); };
  run.interventions = &interventions;
  session.Prefill(ids.data(), static_cast<int>(ids.size()), run);
  const int top_k = static_cast<int>(args.GetInt("top-k", 10));
  const std::string out_path = args.Get("json");
  WriteJsonFile(out_path, [&](std::ostream& out) {
    WriteInspectJson(out, *m.model, *m.tokenizer, ids, recorder, top_k, interventions);
  });
  std::cerr << "gpt2: wrote " << recorder.tensors().size() << " tensors and the logit lens for "
            << ids.size() << " tokens to " << out_path << "\n";
  return 0;
}

// Reads an optional token id flag; -1 when absent.
int TokenIdArg(const Args& args, const std::string& flag, int n_vocab) {
  if (!args.Has(flag)) return -1;
  const long long id = args.GetInt(flag, -1);
  if (id < 0 || id >= n_vocab) {
    throw UsageError("--" + flag + ": token id " + std::to_string(id) +
                     " is outside the vocabulary; valid ids are 0.." + std::to_string(n_vocab - 1));
  }
  return static_cast<int>(id);
}

int Attribute(const Args& args) {
  const QuantActivations activations = ActivationsArg(args);
  LoadedModel m = Load(args.Get("model"), true);
  const Config& c = m.model->config();
  Session session(*m.model, static_cast<int>(args.GetInt("threads", DefaultThreads())),
                  activations);
  const std::vector<int> ids = m.tokenizer->Encode(args.Get("prompt"));
  if (ids.empty()) throw Error("the prompt is empty");
  if (static_cast<int>(ids.size()) > c.n_ctx) {
    throw Error("the prompt is too long for the model: " + std::to_string(ids.size()) +
                " tokens, but its context holds " + std::to_string(c.n_ctx));
  }
  const Interventions interventions = InterventionsFromArgs(args, c);
  AttributionRequest request;
  request.target = TokenIdArg(args, "target", c.n_vocab);
  request.contrast = TokenIdArg(args, "contrast", c.n_vocab);
  if (args.Has("position")) {
    const long long p = args.GetInt("position", -1);
    if (p < 0 || p >= static_cast<long long>(ids.size())) {
      throw UsageError("--position: " + std::to_string(p) +
                       " is out of range; the prompt's positions are 0.." +
                       std::to_string(ids.size() - 1));
    }
    request.position = static_cast<int>(p);
  }
  request.interventions = &interventions;
  const Attribution a = AttributeLogit(session, ids, request);
  for (const AttributionComponent& comp : a.components) {
    std::printf("%s\t%.7g\n", comp.name.c_str(), comp.value);
  }
  std::printf("logit\t%.7g\n", a.logit);
  if (args.Has("json")) {
    WriteJsonFile(args.Get("json"), [&](std::ostream& out) { WriteAttributionJson(out, a); });
  }
  return 0;
}

int Bench(const Args& args) {
  using Clock = std::chrono::steady_clock;
  const QuantActivations activations = ActivationsArg(args);
  LoadedModel m = Load(args.Get("model"), false);
  const Config& c = m.model->config();
  const int threads = static_cast<int>(args.GetInt("threads", 1));
  const int n_prompt =
      std::min<int>(static_cast<int>(args.GetInt("prompt-tokens", 128)), c.n_ctx - 1);
  const int n_decode =
      std::min<int>(static_cast<int>(args.GetInt("decode-tokens", 64)), c.n_ctx - n_prompt);
  const int repeats = static_cast<int>(args.GetInt("repeats", 3));
  Session session(*m.model, threads, activations);
  std::vector<int> prompt(n_prompt);
  for (int i = 0; i < n_prompt; ++i) prompt[i] = (i * 7919 + 13) % c.n_vocab;  // arbitrary ids

  // With intervention flags, also time a re-run of the prompt under them that reuses the
  // clean prefill's cache before the first changed block.
  const Interventions interventions = InterventionsFromArgs(args, c);
  const int first = interventions.FirstChangedBlock(c.n_layer);
  Acts acts;
  RunOptions keep;  // keeps the stream entering each block
  if (!interventions.empty()) RecordActs(c, Keep{{Hook::kEmbed, Hook::kResidPost}}, acts, keep);
  RunOptions intervened;
  intervened.interventions = &interventions;

  double best_prefill = 1e30, best_decode = 1e30, best_rerun = 1e30;
  for (int r = 0; r < repeats; ++r) {
    session.Reset();
    if (!interventions.empty()) {
      session.Prefill(prompt.data(), n_prompt, keep);
      const auto r0 = Clock::now();
      session.Rerun({0, n_prompt, first}, acts.StreamInto(first).data(), intervened);
      best_rerun = std::min(best_rerun, std::chrono::duration<double>(Clock::now() - r0).count());
      session.Reset();
    }
    const auto t0 = Clock::now();
    const float* logits = session.Prefill(prompt.data(), n_prompt);
    const auto t1 = Clock::now();
    Sampler sampler(SamplingParams{0.0f, 0, 1.0f, 0});
    for (int i = 0; i < n_decode; ++i) logits = session.Step(sampler.Sample(logits, c.n_vocab));
    const auto t2 = Clock::now();
    best_prefill = std::min(best_prefill, std::chrono::duration<double>(t1 - t0).count());
    best_decode = std::min(best_decode, std::chrono::duration<double>(t2 - t1).count());
  }
  int64_t weight_bytes = 0;
  for (const GgufTensor& t : m.gguf->tensors()) weight_bytes += static_cast<int64_t>(t.nbytes);
  std::printf("model: %s (%s matrices), kernel target %s, threads %d, best of %d\n",
              args.Get("model").c_str(), GgmlTypeName(uint32_t(m.model->blocks[0].qkv.type)),
              ActiveKernelTargetName().c_str(), threads, repeats);
  std::printf("prefill: %d tokens in %.3f s = %.1f tokens/s\n", n_prompt, best_prefill,
              n_prompt / best_prefill);
  std::printf("decode: %d tokens in %.3f s = %.1f tokens/s (%.1f GB/s of weights)\n", n_decode,
              best_decode, n_decode / best_decode, weight_bytes * (n_decode / best_decode) / 1e9);
  if (!interventions.empty()) {
    std::printf("intervened re-run from block %d: %d tokens in %.3f s (%.2f x the prefill)\n",
                first, n_prompt, best_rerun, best_rerun / best_prefill);
  }
  return 0;
}

int Main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "help" || std::string(argv[1]) == "--help") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  if (command == "generate") {
    return Generate(Args(argc, argv, 2,
                         WithInterventionFlags({"model", "prompt", "n", "temp", "top-k", "top-p",
                                                "seed", "threads", "print-ids", "activations"}),
                         {"print-ids", "post-norm"}));
  }
  if (command == "tokenize") {
    return Tokenize(Args(argc, argv, 2, {"model", "vocab", "merges", "text", "file"}));
  }
  if (command == "info") return Info(Args(argc, argv, 2, {"model"}));
  if (command == "inspect") {
    return Inspect(
        Args(argc, argv, 2,
             WithInterventionFlags({"model", "prompt", "json", "top-k", "threads", "activations"}),
             {"post-norm"}));
  }
  if (command == "attribute") {
    return Attribute(Args(argc, argv, 2,
                          WithInterventionFlags({"model", "prompt", "target", "contrast",
                                                 "position", "json", "threads", "activations"}),
                          {"post-norm"}));
  }
  if (command == "path-patch") return PathPatchCommand(argc, argv);
  if (command == "bench") {
    return Bench(Args(argc, argv, 2,
                      WithInterventionFlags({"model", "prompt-tokens", "decode-tokens", "threads",
                                             "repeats", "activations"}),
                      {"post-norm"}));
  }
  if (command == "heads") return HeadsCommand(argc, argv);
  if (command == "compare") return CompareCommand(argc, argv);
  if (command == "features") return FeaturesCommand(argc, argv);
  if (command == "graph") return GraphCommand(argc, argv);
  if (command == "dashboard") {
    const Args args = [&] {
      try {
        return Args(argc, argv, 2, DashboardFlags());
      } catch (const Error& e) {
        throw UsageError(e.what());
      }
    }();
    long long threads = 0;
    try {
      threads = args.GetInt("threads", DefaultThreads());
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    return DashboardCommand(args, ActivationsArg(args), static_cast<int>(threads));
  }
  if (command == "saliency" || command == "atp") {
    const Args args = [&] {
      try {
        return Args(argc, argv, 2, WithInterventionFlags(GradientsFlags(command)), {"post-norm"});
      } catch (const Error& e) {
        throw UsageError(e.what());  // an unknown or valueless flag
      }
    }();
    CheckGradientsFlags(command, args);
    const QuantActivations activations = ActivationsArg(args);
    LoadedModel m = Load(args.Get("model"), true);
    return GradientsCommand(command, args, *m.model, *m.tokenizer,
                            static_cast<int>(args.GetInt("threads", DefaultThreads())),
                            activations);
  }
  std::cerr << "gpt2: unknown command '" << command << "'\n" << kUsage;
  return 2;
}

}  // namespace
}  // namespace gpt2

int main(int argc, char** argv) {
  try {
    return gpt2::Main(argc, argv);
  } catch (const gpt2::UsageError& e) {
    std::cerr << "gpt2: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "gpt2: error: " << e.what() << "\n";
    return 1;
  }
}
