// gpt2-make-model: writes a deterministic GPT-2-architecture GGUF (tools/common/synthetic_model.h)
// for tests and benchmarks when real weights are not at hand.
//
//   gpt2-make-model --shape tiny --type q8_0 --vocab encoder.json --merges vocab.bpe
//                   --output tiny-q8_0.gguf   (one command line)
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "base/error.h"
#include "format/tensor_type.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"
#include "tools/common/synthetic_model.h"

namespace {

constexpr const char* kUsage =
    "usage: gpt2-make-model --output FILE.gguf [options]\n"
    "\n"
    "Writes a GPT-2-architecture GGUF whose weights are a fixed function of the seed and the\n"
    "tensor names (see src/tools/common/synthetic_model.h), laid out as llama.cpp writes GPT-2.\n"
    "\n"
    "options:\n"
    "  --shape gpt2|gpt2-medium|gpt2-large|gpt2-xl|tiny\n"
    "                         start from a released GPT-2's sizes (small 124M, medium 355M,\n"
    "                         large 774M, XL 1.5B) or the golden-test shape (default tiny)\n"
    "  --n-layer N  --n-head N  --n-embd N  --n-ff N  --n-ctx N  --n-vocab N\n"
    "                         override one size of the shape\n"
    "  --type f32|f16|q8_0|q4_0  storage of the matrices (default f32); norms and biases stay f32\n"
    "  --vocab encoder.json --merges vocab.bpe\n"
    "                         put GPT-2's tokenizer in the file (n_vocab must match, 50257)\n"
    "  --seed N               weight seed (default 0x5EED); decimal or 0x hex\n"
    "  --output FILE          where to write (written to FILE.tmp, then renamed)\n";

[[noreturn]] void UsageError(const std::string& message) {
  std::fprintf(stderr, "gpt2-make-model: %s\n\n%s", message.c_str(), kUsage);
  std::exit(2);
}

int64_t ParseInt(const std::string& flag, const std::string& text, int64_t min_value) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 0);
  if (text.empty() || *end != '\0' || errno != 0 || v < min_value) {
    UsageError(flag + " needs an integer >= " + std::to_string(min_value) + ", got '" + text + "'");
  }
  return v;
}

uint64_t ParseSeed(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 0);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno != 0) {
    UsageError("--seed needs a non-negative integer (decimal or 0x hex), got '" + text + "'");
  }
  return v;
}

gpt2::TensorType ParseType(const std::string& text) {
  if (text == "f32") return gpt2::TensorType::kF32;
  if (text == "f16") return gpt2::TensorType::kF16;
  if (text == "q8_0") return gpt2::TensorType::kQ8_0;
  if (text == "q4_0") return gpt2::TensorType::kQ4_0;
  UsageError("--type must be one of f32, f16, q8_0, q4_0; got '" + text + "'");
}

}  // namespace

int main(int argc, char** argv) {
  gpt2::Config config = gpt2::TinyTestConfig();
  gpt2::TensorType type = gpt2::TensorType::kF32;
  uint64_t seed = gpt2::kSyntheticSeed;
  std::string output, vocab_path, merges_path;
  // Explicit sizes apply after --shape whatever the order on the command line.
  int64_t n_layer = -1, n_head = -1, n_embd = -1, n_ff = -1, n_ctx = -1, n_vocab = -1;

  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) UsageError(flag + " needs a value (or is not an option)");
    const std::string value = argv[++i];
    if (flag == "--shape") {
      if (const gpt2::ReleasedGpt2* released = gpt2::FindReleasedGpt2(value.c_str())) {
        config = released->config();
      } else if (value == "tiny") {
        config = gpt2::TinyTestConfig();
      } else {
        UsageError("--shape must be gpt2, gpt2-medium, gpt2-large, gpt2-xl or tiny, got '" + value +
                   "'");
      }
    } else if (flag == "--n-layer") {
      n_layer = ParseInt(flag, value, 1);
    } else if (flag == "--n-head") {
      n_head = ParseInt(flag, value, 1);
    } else if (flag == "--n-embd") {
      n_embd = ParseInt(flag, value, 1);
    } else if (flag == "--n-ff") {
      n_ff = ParseInt(flag, value, 1);
    } else if (flag == "--n-ctx") {
      n_ctx = ParseInt(flag, value, 1);
    } else if (flag == "--n-vocab") {
      n_vocab = ParseInt(flag, value, 1);
    } else if (flag == "--type") {
      type = ParseType(value);
    } else if (flag == "--vocab") {
      vocab_path = value;
    } else if (flag == "--merges") {
      merges_path = value;
    } else if (flag == "--seed") {
      seed = ParseSeed(value);
    } else if (flag == "--output" || flag == "-o") {
      output = value;
    } else {
      UsageError("unknown option '" + flag + "'");
    }
  }
  constexpr int64_t kMaxSize = 1 << 20;
  auto apply = [&](const char* name, int64_t v, int* field) {
    if (v < 0) return;
    if (v > kMaxSize) UsageError(std::string(name) + " is unreasonably large");
    *field = static_cast<int>(v);
  };
  apply("--n-layer", n_layer, &config.n_layer);
  apply("--n-head", n_head, &config.n_head);
  apply("--n-embd", n_embd, &config.n_embd);
  apply("--n-ff", n_ff, &config.n_ff);
  apply("--n-ctx", n_ctx, &config.n_ctx);
  apply("--n-vocab", n_vocab, &config.n_vocab);

  if (output.empty()) UsageError("--output FILE.gguf is required");
  if (vocab_path.empty() != merges_path.empty()) {
    UsageError("--vocab and --merges go together (encoder.json and vocab.bpe)");
  }

  try {
    std::unique_ptr<gpt2::Tokenizer> tokenizer;
    if (!vocab_path.empty()) tokenizer = gpt2::Tokenizer::FromFiles(vocab_path, merges_path);
    gpt2::WriteSyntheticModel(output, config, type, tokenizer.get(), seed);
    std::printf("wrote %s: %d layers, %d heads, n_embd %d, n_ff %d, n_ctx %d, n_vocab %d, %s%s\n",
                output.c_str(), config.n_layer, config.n_head, config.n_embd, config.n_ff,
                config.n_ctx, config.n_vocab, gpt2::GgmlTypeName(static_cast<uint32_t>(type)),
                tokenizer ? ", with tokenizer" : ", no tokenizer");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt2-make-model: %s\n", e.what());
    return 1;
  }
  return 0;
}
