// gpt2 path-patch --model M --clean P --corrupt P2 (--sender L.H | --sweep) [--receivers SPEC]
//                 [--target ID] [--contrast ID] [--threads N]
// One sender prints `metric<TAB>m_patched`, `clean<TAB>m_clean`, last `corrupt<TAB>m_corrupt`;
// --sweep prints `L.H<TAB>m_patched - m_clean` for every head as the sender, layer by layer
// (0 where no receiver comes after it: its receivers see the clean run's inputs). The lab runs
// it (int8 activations for Q8_0/Q4_0 weights, as the page), so the page's sweep gives the same
// numbers.
#include "tools/cli/path_patch_cmd.h"

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "format/gguf.h"
#include "lab/lab.h"
#include "tools/cli/args.h"
#include "tools/common/intervention_flags.h"

namespace gpt2 {
namespace {

// A lab error that is the caller's input at fault becomes a usage error (exit status 2).
template <typename F>
auto AsUsage(F f) -> decltype(f()) {
  try {
    return f();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

HeadRef SenderArg(const std::string& text, const Config& c) {
  const size_t dot = text.find('.');
  const std::string l = text.substr(0, dot),
                    h = dot == std::string::npos ? "" : text.substr(dot + 1);
  auto number = [](const std::string& s) {
    if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos)
      return -1;
    return std::stoi(s);
  };
  const HeadRef sender{number(l), number(h)};
  if (sender.layer < 0 || sender.head < 0)
    throw UsageError("--sender: '" + text + "' is not LAYER.HEAD (e.g. 0.3)");
  if (sender.layer >= c.n_layer) {
    throw UsageError("--sender: layer " + l + " is out of range; valid layers are 0.." +
                     std::to_string(c.n_layer - 1));
  }
  if (sender.head >= c.n_head) {
    throw UsageError("--sender: head " + h + " is out of range; valid heads are 0.." +
                     std::to_string(c.n_head - 1));
  }
  return sender;
}

int TokenArg(const Args& args, const std::string& flag, int n_vocab) {
  if (!args.Has(flag)) return -1;
  const long long id = AsUsage([&] { return args.GetInt(flag, -1); });
  if (id < 0 || id >= n_vocab) {
    throw UsageError("--" + flag + ": token id " + std::to_string(id) +
                     " is outside the vocabulary; valid ids are 0.." + std::to_string(n_vocab - 1));
  }
  return static_cast<int>(id);
}

}  // namespace

int PathPatchCommand(int argc, char** argv) {
  const Args args = AsUsage([&] {
    return Args(argc, argv, 2,
                {"model", "clean", "corrupt", "sender", "sweep", "receivers", "target", "contrast",
                 "threads"},
                {"sweep"});
  });
  for (const char* required : {"model", "clean", "corrupt"}) {
    if (!args.Has(required)) throw UsageError(std::string("path-patch needs --") + required);
  }
  if (args.Has("sweep") == args.Has("sender"))
    throw UsageError("path-patch needs either --sender L.H or --sweep");
  const long long threads = AsUsage([&] {
    const unsigned n = std::thread::hardware_concurrency();
    return args.GetInt("threads", n == 0 ? 1 : n);
  });
  if (threads < 1) throw UsageError("--threads must be at least 1");

  std::unique_ptr<MappedFile> mapping = MappedFile::Open(args.Get("model"));
  Lab lab(LoadGguf(mapping->data(), mapping->size()), static_cast<int>(threads));
  const Config& c = lab.config();
  const std::vector<int> clean = lab.tokenizer().Encode(args.Get("clean"));
  const std::vector<int> corrupt = lab.tokenizer().Encode(args.Get("corrupt"));
  if (clean.empty() || corrupt.empty()) throw UsageError("--clean and --corrupt must not be empty");
  if (clean.size() != corrupt.size()) {
    throw UsageError("--clean is " + std::to_string(clean.size()) + " tokens and --corrupt " +
                     std::to_string(corrupt.size()) +
                     ": path patching needs the same number of tokens");
  }
  if (static_cast<int>(clean.size()) > c.n_ctx) {
    throw UsageError("the prompts are " + std::to_string(clean.size()) +
                     " tokens, longer than the context of " + std::to_string(c.n_ctx));
  }
  const std::vector<PathReceiver> receivers =
      AsUsage([&] { return ParsePathReceivers(args.Get("receivers", "logits"), c); });
  const int target = TokenArg(args, "target", c.n_vocab);
  const int contrast = TokenArg(args, "contrast", c.n_vocab);

  if (args.Has("sender")) {
    const HeadRef sender = SenderArg(args.Get("sender"), c);
    AsUsage([&] {
      CheckPathSender(sender, receivers, c);
      return 0;
    });
    const PathPatchResult r = lab.PathPatch(clean, corrupt, sender, receivers, target, contrast);
    std::printf("metric\t%.7g\nclean\t%.7g\ncorrupt\t%.7g\n", r.patched, r.clean, r.corrupt);
    return 0;
  }
  lab.StartPathPatch(clean, corrupt, receivers, target, contrast, LabInterventions());
  while (!lab.job_done()) lab.ContinueJob();
  for (const JobCell& cell : lab.job_results())
    std::printf("%d.%d\t%.7g\n", cell.layer, cell.index, cell.value);
  lab.EndJob();
  return 0;
}

}  // namespace gpt2
