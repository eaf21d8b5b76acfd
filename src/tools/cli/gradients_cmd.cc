// gpt2 saliency --model M --prompt P [--target ID] [--contrast ID] [--position N]
//               [--method grad|ig] [--steps K] [--json FILE] [INTERVENTIONS]
//   p<TAB>value per prompt token, then total<TAB>sum, last delta<TAB>m(x) - m(baseline)
//   (for grad: m(x)). --json: {"position", "target", "contrast", "method", "steps",
//   "values": [...], "total", "delta"}.
// gpt2 atp --model M --clean P --corrupt P2 [--target ID] [--contrast ID] [--json FILE]
//   L.H<TAB>value per head, resid_pre.L.P<TAB>value per block and position,
//   metric<TAB>m_clean, last metric_corrupt<TAB>m_corrupt. --json: {"target", "contrast",
//   "tokens", "heads": [[...] per layer], "resid_pre": [[...] per layer], "metric",
//   "metric_corrupt"}.
#include "tools/cli/gradients_cmd.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "lab/gradients.h"
#include "model/backward.h"
#include "tools/cli/json_out.h"
#include "tools/common/intervention_flags.h"

namespace gpt2 {

namespace {

// An integer flag; a malformed one is a UsageError.
long long IntFlag(const Args& args, const std::string& flag, long long fallback) {
  try {
    return args.GetInt(flag, fallback);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

int TokenId(const Args& args, const std::string& flag, int n_vocab) {
  if (!args.Has(flag)) return -1;
  const long long id = IntFlag(args, flag, -1);
  if (id < 0 || id >= n_vocab) {
    throw UsageError("--" + flag + ": token id " + std::to_string(id) +
                     " is outside the vocabulary; valid ids are 0.." + std::to_string(n_vocab - 1));
  }
  return static_cast<int>(id);
}

std::vector<int> Prompt(const Args& args, const std::string& flag, const Tokenizer& tokenizer,
                        const Config& c) {
  const std::vector<int> ids = tokenizer.Encode(args.Get(flag));
  if (ids.empty()) throw UsageError("--" + flag + ": the prompt is empty");
  if (static_cast<int>(ids.size()) > c.n_ctx) {
    throw UsageError("--" + flag +
                     ": the prompt is too long for the model: " + std::to_string(ids.size()) +
                     " tokens, but its context holds " + std::to_string(c.n_ctx));
  }
  return ids;
}

int RunSaliency(const Args& args, const Model& model, const Tokenizer& tokenizer, int n_threads,
                QuantActivations activations) {
  const Config& c = model.config();
  const std::vector<int> ids = Prompt(args, "prompt", tokenizer, c);
  const Interventions iv = InterventionsFromArgs(args, c);
  SaliencyRequest request;
  request.target = TokenId(args, "target", c.n_vocab);
  request.contrast = TokenId(args, "contrast", c.n_vocab);
  if (args.Has("position")) {
    const long long p = IntFlag(args, "position", -1);
    if (p < 0 || p >= static_cast<long long>(ids.size())) {
      throw UsageError("--position: " + std::to_string(p) +
                       " is out of range; the prompt's positions are 0.." +
                       std::to_string(ids.size() - 1));
    }
    request.position = static_cast<int>(p);
  }
  const std::string method = args.Get("method", "grad");
  if (method == "grad")
    request.method = SaliencyMethod::kGradient;
  else if (method == "ig")
    request.method = SaliencyMethod::kIntegrated;
  else
    throw UsageError("--method must be grad or ig, got '" + method + "'");
  const long long steps = IntFlag(args, "steps", 16);
  if (steps < 1 || steps > 1000000) {
    throw UsageError("--steps must be in 1..1000000, got " + std::to_string(steps));
  }
  request.steps = static_cast<int>(steps);

  Session session(model, n_threads, activations);
  Backward backward(model, n_threads);
  const SaliencyResult r = Saliency(session, backward, ids, request, &iv);
  for (size_t p = 0; p < r.values.size(); ++p) std::printf("%zu\t%.7g\n", p, r.values[p]);
  std::printf("total\t%.7g\n", r.total);
  std::printf("delta\t%.7g\n", r.delta);
  if (args.Has("json")) {
    WriteJsonFile(args.Get("json"), [&](std::ostream& out) {
      out << "{\"position\":" << r.position << ",\"target\":" << r.target
          << ",\"contrast\":" << r.contrast << ",\"method\":\"" << method
          << "\",\"steps\":" << request.steps << ",\n\"values\":";
      JsonArray(out, r.values.data(), r.values.size());
      out << ",\n\"total\":";
      JsonNumber(out, r.total);
      out << ",\"delta\":";
      JsonNumber(out, r.delta);
      out << "}\n";
    });
  }
  return 0;
}

int RunAtp(const Args& args, const Model& model, const Tokenizer& tokenizer, int n_threads,
           QuantActivations activations) {
  const Config& c = model.config();
  const std::vector<int> clean = Prompt(args, "clean", tokenizer, c);
  const std::vector<int> corrupt = Prompt(args, "corrupt", tokenizer, c);
  if (clean.size() != corrupt.size()) {
    throw UsageError("--clean and --corrupt must have the same number of tokens; they have " +
                     std::to_string(clean.size()) + " and " + std::to_string(corrupt.size()));
  }
  const Interventions iv = InterventionsFromArgs(args, c);
  const int target = TokenId(args, "target", c.n_vocab);
  const int contrast = TokenId(args, "contrast", c.n_vocab);

  Session session(model, n_threads, activations);
  Backward backward(model, n_threads);
  const AtpResult r = AttributionPatching(session, backward, clean, corrupt, target, contrast, &iv);
  for (int l = 0; l < c.n_layer; ++l) {
    for (int h = 0; h < c.n_head; ++h)
      std::printf("%d.%d\t%.7g\n", l, h, r.heads[size_t(l) * c.n_head + h]);
  }
  for (int l = 0; l < c.n_layer; ++l) {
    for (int p = 0; p < r.tokens; ++p) {
      std::printf("resid_pre.%d.%d\t%.7g\n", l, p, r.resid_pre[size_t(l) * r.tokens + p]);
    }
  }
  std::printf("metric\t%.7g\n", r.metric_clean);
  std::printf("metric_corrupt\t%.7g\n", r.metric_corrupt);
  if (args.Has("json")) {
    WriteJsonFile(args.Get("json"), [&](std::ostream& out) {
      out << "{\"target\":" << r.target << ",\"contrast\":" << r.contrast
          << ",\"tokens\":" << r.tokens << ",\n\"heads\":[";
      for (int l = 0; l < c.n_layer; ++l) {
        if (l) out << ',';
        JsonArray(out, r.heads.data() + size_t(l) * c.n_head, c.n_head);
      }
      out << "],\n\"resid_pre\":[";
      for (int l = 0; l < c.n_layer; ++l) {
        if (l) out << ',';
        JsonArray(out, r.resid_pre.data() + size_t(l) * r.tokens, r.tokens);
      }
      out << "],\n\"metric\":";
      JsonNumber(out, r.metric_clean);
      out << ",\"metric_corrupt\":";
      JsonNumber(out, r.metric_corrupt);
      out << "}\n";
    });
  }
  return 0;
}

}  // namespace

std::set<std::string> GradientsFlags(const std::string& command) {
  if (command == "saliency") {
    return {"model",  "prompt", "target", "contrast", "position",
            "method", "steps",  "json",   "threads",  "activations"};
  }
  return {"model", "clean", "corrupt", "target", "contrast", "json", "threads", "activations"};
}

void CheckGradientsFlags(const std::string& command, const Args& args) {
  const std::vector<std::string> required =
      command == "saliency" ? std::vector<std::string>{"model", "prompt"}
                            : std::vector<std::string>{"model", "clean", "corrupt"};
  for (const std::string& flag : required) {
    if (!args.Has(flag)) throw UsageError("missing --" + flag);
  }
}

int GradientsCommand(const std::string& command, const Args& args, const Model& model,
                     const Tokenizer& tokenizer, int n_threads, QuantActivations activations) {
  if (command == "saliency") return RunSaliency(args, model, tokenizer, n_threads, activations);
  return RunAtp(args, model, tokenizer, n_threads, activations);
}

}  // namespace gpt2
