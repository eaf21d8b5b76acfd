// Path patching in the lab (src/lab/path_patch.h) against PyTorch: scripts/make_golden.py's
// write_path_patch runs ARENA's three steps literally (every head's hook_z frozen by assignment,
// the receivers' q/k/v patched) on the same tiny synthetic model and writes
// tests/data/golden_path_patch.bin. Also: the sweep job, run in pieces, equals one-by-one runs,
// and the lab's conversation comes back afterwards.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../model/golden_file.h"
#include "base/error.h"
#include "lab/lab.h"
#include "model/capture.h"
#include "tools/common/synthetic_model.h"

namespace gpt2_test {
namespace {

constexpr double kF32Tolerance = 1e-4;    // against PyTorch, as golden_test.cc
constexpr double kRerunTolerance = 1e-5;  // the same runs grouped differently

const GoldenFile& Golden() { return GoldenData("golden_path_patch.bin"); }

std::vector<int> Ids(const std::string& name) {
  const std::vector<int32_t>& ids = Golden().I32(name);
  return std::vector<int>(ids.begin(), ids.end());
}

std::vector<gpt2::PathReceiver> Receivers(const std::string& name) {
  const std::vector<int32_t>& r = Golden().I32(name);
  REQUIRE(r.size() == size_t(1 + 3 * r[0]));
  const gpt2::HeadPart parts[3] = {gpt2::HeadPart::kQuery, gpt2::HeadPart::kKey,
                                   gpt2::HeadPart::kValue};
  std::vector<gpt2::PathReceiver> out;
  for (int i = 0; i < r[0]; ++i) out.push_back({r[1 + 3 * i], r[2 + 3 * i], parts[r[3 + 3 * i]]});
  return out;
}

struct TinyLab {
  std::vector<uint8_t> bytes =
      gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), gpt2::TensorType::kF32, nullptr);
  std::unique_ptr<gpt2::Lab> lab;
  const std::vector<int> clean = Ids("clean_ids"), corrupt = Ids("corrupt_ids");

  TinyLab() {
    gpt2::LoadedGguf loaded;
    loaded.file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
    loaded.model = gpt2::Model::FromGguf(loaded.file);
    lab = std::make_unique<gpt2::Lab>(std::move(loaded), 1);
  }
  const gpt2::Config& config() const { return lab->config(); }
};

TEST_CASE_METHOD(TinyLab, "path patching to logits and to q, k and v receivers equals PyTorch",
                 "[path_patch][lab]") {
  for (const char* name : {"logits", "logits_contrast", "q", "k", "v", "mixed"}) {
    const std::string key = std::string("pp/") + name;
    SECTION(name) {
      const std::vector<int32_t>& query = Golden().I32(key + "/query");
      const std::vector<float>& want = Golden().F32(key + "/values");
      // Without a contrast the target is left to the default (the clean run's top token).
      const int contrast = query[3];
      const int target = contrast < 0 ? -1 : query[2];
      const gpt2::PathPatchResult r = lab->PathPatch(
          clean, corrupt, {query[0], query[1]}, Receivers(key + "/receivers"), target, contrast);
      INFO(name << ": patched " << r.patched << " vs " << want[0]);
      CHECK(r.target == query[2]);
      CHECK(r.contrast == contrast);
      CHECK(r.patched == Approx(want[0]).margin(kF32Tolerance));
      CHECK(r.clean == Approx(want[1]).margin(kF32Tolerance));
      CHECK(r.corrupt == Approx(want[2]).margin(kF32Tolerance));
      // The path carries something, so a patch that did nothing would fail above.
      CHECK(std::abs(want[0] - want[1]) > 1e-3);
    }
  }
}

TEST_CASE_METHOD(TinyLab, "the path patching sweep, in pieces, equals PyTorch and one-by-one runs",
                 "[path_patch][lab]") {
  const int L = config().n_layer, H = config().n_head;
  for (const char* name : {"logits", "qk"}) {
    const std::string key = std::string("sweep/") + name;
    SECTION(name) {
      const std::vector<int32_t>& query = Golden().I32(key + "/query");
      const std::vector<float>& want = Golden().F32(key + "/values");
      const std::vector<gpt2::PathReceiver> receivers = Receivers(key + "/receivers");
      REQUIRE(want.size() == size_t(L) * H);
      // A conversation to give back afterwards.
      lab->Reset();
      lab->SetCapture(true);
      lab->Run({464, 2068, 7586});
      const double before = lab->LogProbs(2, {21831}).at(0);

      const gpt2::PathPatchStart start = lab->StartPathPatch(clean, corrupt, receivers, query[0],
                                                             query[1], gpt2::LabInterventions());
      CHECK(start.total == L * H);
      CHECK(start.positions == static_cast<int>(clean.size()));
      int calls = 0, done = 0;
      while (!lab->job_done()) {
        const int now = lab->ContinueJob();
        CHECK(now > done);
        done = now;
        ++calls;
      }
      CHECK(calls > 1);
      const std::vector<gpt2::JobCell> cells = lab->job_results();
      lab->EndJob();
      CHECK(lab->tokens() == std::vector<int>({464, 2068, 7586}));
      CHECK(lab->LogProbs(2, {21831}).at(0) == Approx(before).margin(1e-9));

      REQUIRE(cells.size() == want.size());
      for (size_t i = 0; i < cells.size(); ++i) {
        const int l = cells[i].layer, h = cells[i].index;
        INFO("sender " << l << "." << h);
        CHECK(l * H + h == static_cast<int>(i));
        CHECK(cells[i].value == Approx(want[i]).margin(kF32Tolerance));
        bool after = receivers.empty();
        for (const gpt2::PathReceiver& r : receivers) after = after || r.layer > l;
        if (!after) {
          CHECK(cells[i].value == 0.0);  // every receiver sees the clean inputs
          continue;
        }
        const gpt2::PathPatchResult one =
            lab->PathPatch(clean, corrupt, {l, h}, receivers, query[0], query[1]);
        CHECK(cells[i].value == Approx(one.patched - one.clean).margin(kRerunTolerance));
      }
    }
  }
}

TEST_CASE_METHOD(TinyLab, "a sender's paths, each alone, equal one-by-one runs and PyTorch's",
                 "[path_patch][lab]") {
  const int L = config().n_layer, H = config().n_head;
  const std::vector<int32_t>& query = Golden().I32("pp/logits/query");  // sender 0.1, to the logits
  const gpt2::HeadRef sender{query[0], query[1]};
  lab->Reset();
  const gpt2::PathPatchStart start =
      lab->StartSenderPaths(clean, corrupt, sender, -1, -1, gpt2::LabInterventions());
  CHECK(start.target == query[2]);
  CHECK(start.total == 1 + (L - 1 - sender.layer) * H);
  int calls = 0;
  while (!lab->job_done()) {
    lab->ContinueJob();
    ++calls;
  }
  CHECK(calls > 1);
  const std::vector<gpt2::JobCell> cells = lab->job_results();
  lab->EndJob();
  REQUIRE(cells.size() == size_t(start.total));
  // The logits first: PyTorch's path from 0.1 to the logits.
  CHECK(cells[0].layer == L);
  const std::vector<float>& want = Golden().F32("pp/logits/values");
  CHECK(cells[0].value == Approx(want[0] - want[1]).margin(kF32Tolerance));
  // Then every later head with its q, k and v as the receiver, from the last block down.
  int last_layer = L;
  for (size_t i = 1; i < cells.size(); ++i) {
    const int l = cells[i].layer, h = cells[i].index;
    INFO("receiver " << l << "." << h);
    CHECK(l > sender.layer);
    CHECK(l <= last_layer);
    last_layer = l;
    const std::string head = std::to_string(l) + "." + std::to_string(h);
    const gpt2::PathPatchResult one = lab->PathPatch(
        clean, corrupt, sender,
        gpt2::ParsePathReceivers(head + ".q," + head + ".k," + head + ".v", config()), -1, -1);
    CHECK(cells[i].value == Approx(one.patched - one.clean).margin(kRerunTolerance));
  }
}

TEST_CASE_METHOD(TinyLab, "path patching refuses what it cannot do, naming why",
                 "[path_patch][lab]") {
  const gpt2::Config& c = config();
  auto message = [&](auto f) -> std::string {
    try {
      f();
    } catch (const gpt2::Error& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(gpt2::ParsePathReceivers("logits", c).empty());
  const std::vector<gpt2::PathReceiver> r = gpt2::ParsePathReceivers("1.0.q,1.3.k,1.2.v", c);
  REQUIRE(r.size() == 3);
  CHECK((r[1].layer == 1 && r[1].head == 3 && r[1].part == gpt2::HeadPart::kKey));
  CHECK(r[2].part == gpt2::HeadPart::kValue);
  for (const char* bad : {"", "1.0", "1.0.z", "1.0.q,", "a.0.q", "1..q", "logit", "1.0.q,logits"}) {
    INFO(bad);
    CHECK(message([&] { gpt2::ParsePathReceivers(bad, c); }).find("is not LAYER.HEAD.q|k|v") !=
          std::string::npos);
  }
  CHECK(message([&] { gpt2::ParsePathReceivers("2.0.q", c); }).find("valid layers are 0..1") !=
        std::string::npos);
  CHECK(message([&] { gpt2::ParsePathReceivers("1.4.k", c); }).find("valid heads are 0..3") !=
        std::string::npos);
  CHECK(message([&] {
          gpt2::CheckPathSender({1, 0}, gpt2::ParsePathReceivers("1.2.q", c), c);
        }).find("is not after the sender") != std::string::npos);
  CHECK(message([&] {
          gpt2::CheckPathSender({0, 4}, {}, c);
        }).find("valid heads are 0..3") != std::string::npos);
  std::vector<int> shorter = corrupt;
  shorter.pop_back();
  CHECK(message([&] {
          lab->PathPatch(clean, shorter, {0, 0}, {}, -1, -1);
        }).find("same number of tokens") != std::string::npos);
  CHECK(message([&] {
          lab->PathPatch(clean, corrupt, {0, 0}, {}, c.n_vocab, -1);
        }).find("not in the vocabulary") != std::string::npos);
  // A refused run leaves no job behind.
  CHECK_THROWS_AS(lab->ContinueJob(), gpt2::Error);
}

}  // namespace
}  // namespace gpt2_test
