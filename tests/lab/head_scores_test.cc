// Head detection (src/lab/head_scores.h) against PyTorch (tests/data/golden_circuits_heads.bin,
// scripts/make_golden.py's write_heads: the same scores from torch's attention probabilities on
// the tiny synthetic model), and on the committed small model, whose previous-token head 0.0 and
// induction head 2.0 weights/README.md documents.
#include "lab/head_scores.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../model/golden_file.h"
#include "../test_paths.h"
#include "base/error.h"
#include "lab/lab.h"
#include "model/config.h"
#include "tools/common/synthetic_model.h"

namespace gpt2_test {
namespace {

// f32 against PyTorch, as the other golden tests.
constexpr double kF32Tolerance = 1e-4;

const GoldenFile& HeadsGolden() { return GoldenData("golden_circuits_heads.bin"); }

std::vector<int> Ints(const std::vector<int32_t>& v) {
  return std::vector<int>(v.begin(), v.end());
}

std::unique_ptr<gpt2::Lab> TinyLab(std::vector<uint8_t>& bytes) {
  bytes = gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), gpt2::TensorType::kF32, nullptr);
  gpt2::LoadedGguf loaded;
  loaded.file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
  loaded.model = gpt2::Model::FromGguf(loaded.file);
  return std::make_unique<gpt2::Lab>(std::move(loaded), 1);
}

std::vector<float> AsFloats(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

TEST_CASE("The default ids of `gpt2 heads` are the documented SplitMix64 draw",
          "[circuits][heads]") {
  const std::vector<int> ids = gpt2::DefaultHeadIds(50257);
  CHECK(ids == Ints(HeadsGolden().I32("default_ids")));
  CHECK(std::set<int>(ids.begin(), ids.end()).size() == ids.size());
  CHECK(std::find(ids.begin(), ids.end(), gpt2::kEndOfText) == ids.end());
  // A longer draw starts with the same ids.
  const std::vector<int> longer = gpt2::DefaultHeadIds(50257, 81);
  CHECK(std::vector<int>(longer.begin(), longer.begin() + 50) == ids);
  CHECK_THROWS_WITH(gpt2::DefaultHeadIds(40, 50), Catch::Contains("distinct token ids"));
}

TEST_CASE("Head scores equal PyTorch's on the tiny model", "[circuits][heads][golden]") {
  std::vector<uint8_t> bytes;
  auto lab = TinyLab(bytes);
  const int L = lab->config().n_layer, H = lab->config().n_head;
  for (const char* name : {"default20", "repeats", "max31"}) {
    SECTION(name) {
      const std::string key = name;
      const std::vector<int> ids = Ints(HeadsGolden().I32(key + "/ids"));
      if (key == "default20") CHECK(ids == gpt2::DefaultHeadIds(lab->config().n_vocab, 20));
      const gpt2::HeadScores s = gpt2::DetectHeads(lab->conv(), ids);
      REQUIRE(s.n_layer == L);
      REQUIRE(s.n_head == H);
      CHECK(s.repeat == int(ids.size()));
      for (const char* score : {"prev", "dup", "induction"}) {
        const std::string k = key + "/" + score;
        const std::vector<double>& ours = std::string(score) == "prev"  ? s.prev
                                          : std::string(score) == "dup" ? s.dup
                                                                        : s.induction;
        REQUIRE(ours.size() == size_t(L) * H);
        CHECK(CheckTensor(k, AsFloats(ours).data(), HeadsGolden().F32(k).data(), L * H,
                          kF32Tolerance));
      }
      // The conversation is the repeated sequence, captured, for the attention view.
      CHECK(lab->tokens() == gpt2::RepeatedSequence(ids));
      CHECK(lab->capture().n_positions() == 2 * int(ids.size()) + 1);
    }
  }
}

TEST_CASE("Head detection rejects ids that do not fit the model before it runs anything",
          "[circuits][heads]") {
  std::vector<uint8_t> bytes;
  auto lab = TinyLab(bytes);
  lab->SetCapture(false);
  lab->Run({1, 2, 3});
  const std::vector<int> before = lab->tokens();
  CHECK_THROWS_WITH(gpt2::DetectHeads(lab->conv(), {}), Catch::Contains("at least one token id"));
  CHECK_THROWS_WITH(gpt2::DetectHeads(lab->conv(), {5, 50257}),
                    Catch::Contains("not in the vocabulary (0..50256)"));
  CHECK_THROWS_WITH(gpt2::DetectHeads(lab->conv(), {-1}), Catch::Contains("not in the vocabulary"));
  // n_ctx 64: 32 ids make 65 positions.
  CHECK_THROWS_WITH(gpt2::DetectHeads(lab->conv(), std::vector<int>(32, 7)),
                    Catch::Contains("at most 31 ids"));
  CHECK(lab->tokens() == before);
  // A success keeps the capture setting as it was (off), the sequence captured all the same.
  gpt2::DetectHeads(lab->conv(), {7, 8, 9});
  CHECK_FALSE(lab->capture_on());
  CHECK(lab->capture().n_positions() == 7);
}

TEST_CASE("The uniform baseline is what evenly spread attention scores", "[circuits][heads]") {
  const gpt2::UniformScores u = gpt2::UniformHeadScores(50);
  double prev = 0, dup = 0;
  for (int p = 1; p <= 100; ++p) prev += 1.0 / (p + 1);
  for (int p = 51; p <= 100; ++p) dup += 1.0 / (p + 1);
  CHECK(u.prev == Approx(prev / 100).epsilon(1e-12));
  CHECK(u.dup == Approx(dup / 50).epsilon(1e-12));
  CHECK(u.induction == u.dup);
  CHECK(u.prev == Approx(0.0419).margin(1e-3));  // weights/README.md's "spread evenly" figures
  CHECK(u.dup == Approx(0.0139).margin(1e-3));
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Heads (l * n_head + h) by score, highest first.
std::vector<size_t> Ranked(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] > v[b]; });
  return order;
}

// weights/README.md documents head 0.0 as the previous-token head and 2.0 as an induction head;
// by these scores block 2 holds three induction heads, 2.0, 2.1 and 2.3, close together (2.1
// slightly ahead), and nothing else comes near them.
TEST_CASE("On the small model the documented heads come out on top", "[circuits][heads][tiny]") {
  auto mapping = gpt2::MappedFile::Open(SourcePath("weights/gpt2-tiny-q8_0.gguf"));
  gpt2::LoadedGguf loaded = gpt2::LoadGguf(mapping->data(), mapping->size());
  const std::vector<int> page = loaded.tokenizer->Encode(ReadText(DataPath("tiny_heldout.txt")));
  gpt2::Lab lab(std::move(loaded), 1);
  const size_t H = size_t(lab.config().n_head);
  const size_t kPrevHead = 0 * H + 0;
  const std::set<size_t> kInductionHeads = {2 * H + 0, 2 * H + 1, 2 * H + 3};
  auto top3 = [](const std::vector<double>& v) {
    const std::vector<size_t> r = Ranked(v);
    return std::set<size_t>(r.begin(), r.begin() + 3);
  };

  SECTION("on the first 50 distinct tokens of held-out text") {
    std::vector<int> ids;
    for (int id : page) {
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
      if (ids.size() == 50) break;
    }
    const gpt2::HeadScores s = gpt2::DetectHeads(lab.conv(), ids);
    const std::vector<size_t> induction = Ranked(s.induction);
    INFO("prev 0.0 " << s.prev[kPrevHead] << ", induction 2.0 " << s.induction[2 * H]
                     << ", 4th best induction " << s.induction[induction[3]]);
    CHECK(Ranked(s.prev)[0] == kPrevHead);
    CHECK(s.prev[kPrevHead] > 0.9);
    CHECK(top3(s.induction) == kInductionHeads);
    CHECK(s.induction[2 * H] > 0.5);
    // Far above what evenly spread attention scores, and far above every other head.
    const gpt2::UniformScores u = gpt2::UniformHeadScores(50);
    CHECK(s.induction[induction[2]] > 30 * u.induction);
    CHECK(s.induction[induction[3]] < 0.5 * s.induction[induction[2]]);
  }
  SECTION("on `gpt2 heads`'s default ids") {
    // Random ids are mostly tokens the small model never read (it saw 21.6 k token types), so
    // its induction heads match them weakly; they still lead.
    const gpt2::HeadScores s =
        gpt2::DetectHeads(lab.conv(), gpt2::DefaultHeadIds(lab.config().n_vocab));
    INFO("prev 0.0 " << s.prev[kPrevHead] << ", induction 2.0 " << s.induction[2 * H]);
    CHECK(Ranked(s.prev)[0] == kPrevHead);
    CHECK(top3(s.induction) == kInductionHeads);
  }
}

}  // namespace
}  // namespace gpt2_test
