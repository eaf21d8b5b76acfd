// The committed small model (weights/gpt2-tiny-q8_0.gguf, made by scripts/train_tiny.py) is a
// trained language model, not noise: on English text it never saw (tests/data/tiny_heldout.txt,
// "Whetting Your Appetite" from the Python 3.11 tutorial, a page train_tiny.py holds out of its
// training data) our engine's perplexity is far below a random model's.
//
// Two references independent of our code: a model that knows nothing assigns 1/50257 to every
// token, a cross-entropy of ln 50257 = 10.82 nats per token (perplexity 50257); and PyTorch
// (train_tiny.py, float32 weights) measured this text on the same model at kPyTorchNll. Our
// engine runs the Q8_0 file, so it may differ by the quantization's small error.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/model.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Mean negative log-likelihood (nats per token) of ids[1..] given the tokens before them.
double MeanNll(const Model& model, const std::vector<int>& ids) {
  Session session(model, 1);
  const int V = model.config().n_vocab;
  double total = 0;
  for (size_t t = 0; t + 1 < ids.size(); ++t) {
    const float* logits = session.Step(ids[t]);
    const float max = *std::max_element(logits, logits + V);
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(double(logits[v]) - max);
    total += -(double(logits[ids[t + 1]]) - max - std::log(sum));
  }
  return total / double(ids.size() - 1);
}

TEST_CASE("The committed small model predicts held-out English far better than chance", "[model][tiny]") {
  const std::string path = gpt2_test::SourcePath("weights/gpt2-tiny-q8_0.gguf");
  auto mapping = MappedFile::Open(path);
  std::shared_ptr<const GgufFile> file = GgufFile::Parse(mapping->data(), mapping->size());
  auto model = Model::FromGguf(file);
  const Config& c = model->config();
  CHECK(c.n_vocab == 50257);  // GPT-2's own vocabulary and tokenizer
  std::vector<int> ids = Tokenizer::FromGguf(*file)->Encode(ReadText(gpt2_test::DataPath("tiny_heldout.txt")));
  REQUIRE(ids.size() > 500);
  if (int(ids.size()) > c.n_ctx) ids.resize(c.n_ctx);

  const double nll = MeanNll(*model, ids);
  const double kRandom = std::log(50257.0);
  // From train_tiny.py's log for the committed model (weights/README.md).
  const double kPyTorchNll = 6.1874;
  INFO(ids.size() << " tokens: " << nll << " nats/token (perplexity " << std::exp(nll) << "); PyTorch "
                  << kPyTorchNll << ", random " << kRandom);
  CHECK(std::abs(nll - kPyTorchNll) < 0.05);
  // The stated bound: well below chance, as only a trained model can be.
  CHECK(nll < 0.7 * kRandom);
}

}  // namespace
}  // namespace gpt2
