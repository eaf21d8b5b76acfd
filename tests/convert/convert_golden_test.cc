// The whole import path against PyTorch: the tiny golden model written as a Hugging Face
// checkpoint (model.safetensors layout, Conv1D weights [in, out]), converted by our converter,
// loaded and run, must give the logits scripts/make_golden.py computed with PyTorch.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/convert_test_util.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "model/golden_file.h"
#include "model/session.h"
#include "test_paths.h"
#include "tools/common/synthetic_model.h"

namespace {

using gpt2::TensorType;
using namespace convert_test;

// The golden model's weights (synthetic_model.h formula, in ggml storage order) renamed and laid
// out as Hugging Face stores GPT-2: GGUF matrices are [out rows, in cols]; Conv1D is [in, out].
std::vector<HfTensor> GoldenCheckpointAsHf(const gpt2::Config& c) {
  const int64_t C = c.n_embd, F = c.n_ff;
  std::vector<HfTensor> out;
  auto add = [&](const std::string& hf_name, const std::string& gguf_name, int64_t rows,
                 int64_t cols, bool conv1d) {
    std::vector<float> v = gpt2::SyntheticTensor(gguf_name, rows * cols, c);
    HfTensor t;
    t.name = hf_name;
    if (cols == 0 || rows == 1) {
      t.shape = {rows * std::max<int64_t>(cols, 1)};
      t.values = std::move(v);
    } else if (!conv1d) {
      t.shape = {rows, cols};
      t.values = std::move(v);
    } else {
      t.shape = {cols, rows};
      t.values.resize(v.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < cols; ++k) t.values[k * rows + r] = v[r * cols + k];
    }
    out.push_back(std::move(t));
  };
  add("wte.weight", "token_embd.weight", c.n_vocab, C, false);
  add("wpe.weight", "position_embd.weight", c.n_ctx, C, false);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    const std::string b = "blk." + std::to_string(l) + ".";
    add(h + "ln_1.weight", b + "attn_norm.weight", 1, C, false);
    add(h + "ln_1.bias", b + "attn_norm.bias", 1, C, false);
    add(h + "attn.c_attn.weight", b + "attn_qkv.weight", 3 * C, C, true);
    add(h + "attn.c_attn.bias", b + "attn_qkv.bias", 1, 3 * C, false);
    add(h + "attn.c_proj.weight", b + "attn_output.weight", C, C, true);
    add(h + "attn.c_proj.bias", b + "attn_output.bias", 1, C, false);
    add(h + "ln_2.weight", b + "ffn_norm.weight", 1, C, false);
    add(h + "ln_2.bias", b + "ffn_norm.bias", 1, C, false);
    add(h + "mlp.c_fc.weight", b + "ffn_up.weight", F, C, true);
    add(h + "mlp.c_fc.bias", b + "ffn_up.bias", 1, F, false);
    add(h + "mlp.c_proj.weight", b + "ffn_down.weight", C, F, true);
    add(h + "mlp.c_proj.bias", b + "ffn_down.bias", 1, C, false);
  }
  add("ln_f.weight", "output_norm.weight", 1, C, false);
  add("ln_f.bias", "output_norm.bias", 1, C, false);
  return out;
}

TEST_CASE("convert: a Hugging Face checkpoint of the golden model matches PyTorch's logits",
          "[convert][golden]") {
  const gpt2::Config config = gpt2::TinyTestConfig();
  TinyShape shape;
  shape.n_vocab = config.n_vocab;
  shape.n_ctx = config.n_ctx;
  shape.n_embd = config.n_embd;
  shape.n_head = config.n_head;
  shape.n_layer = config.n_layer;
  shape.n_ff = config.n_ff;
  std::vector<HfTensor> hf = GoldenCheckpointAsHf(config);
  std::vector<StEntry> entries;
  for (HfTensor& t : hf) entries.push_back(Encode(&t, "F32", "transformer."));
  const std::vector<uint8_t> st = WriteSafetensors(entries);
  auto checkpoint = gpt2::SafetensorsFile::Parse(st.data(), st.size(), "golden.safetensors");

  const gpt2_test::GoldenFile& golden = gpt2_test::GoldenData("golden_tiny.bin");
  const std::vector<int32_t>& ids32 = golden.I32("p3/ids");
  const std::vector<int> ids(ids32.begin(), ids32.end());
  const std::vector<float>& want = golden.F32("p3/logits");  // [T, V]
  const size_t V = config.n_vocab, last = (ids.size() - 1) * V;

  // f32 must match PyTorch like the engine's own golden test; quantized files within the
  // golden test's measured bounds (tests/model/golden_test.cc).
  const struct {
    TensorType type;
    double tolerance;
  } kCases[] = {{TensorType::kF32, 1e-4}, {TensorType::kQ8_0, 0.3}};
  for (const auto& c : kCases) {
    INFO("type " << gpt2::GgmlTypeName(static_cast<uint32_t>(c.type)));
    gpt2::GgufWriter writer;
    gpt2::BuildGpt2Gguf(*checkpoint, gpt2::ConfigFromHfJson(TinyConfigJson(shape)), nullptr, c.type,
                        &writer, nullptr);
    const std::vector<uint8_t> bytes = writer.Serialize();
    std::shared_ptr<const gpt2::GgufFile> file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
    auto model = gpt2::Model::FromGguf(file);
    gpt2::Session session(*model);
    const float* logits = session.Prefill(ids.data(), static_cast<int>(ids.size()));
    CHECK(gpt2_test::CheckTensor("converted logits", logits, want.data() + last, V, c.tolerance));
  }
}

// GPT-2 medium, large and XL's widths and head counts (one block, a 512-token vocabulary):
// written as Hugging Face checkpoints, converted (the streamed conversion gives the same bytes),
// loaded and run: every position's logits and the greedy continuation equal PyTorch's
// (scripts/make_golden_family.py).
TEST_CASE("convert: the widths and heads of GPT-2 medium, large and XL match PyTorch",
          "[convert][golden][family]") {
  const gpt2_test::GoldenFile& golden = gpt2_test::GoldenData("golden_family.bin");
  for (const std::string name : {"medium", "large", "xl"}) {
    INFO("shape " << name);
    const std::vector<int32_t>& dims = golden.I32(name + "/config");
    REQUIRE(dims.size() == 6);
    TinyShape shape;
    shape.n_vocab = dims[0];
    shape.n_ctx = dims[1];
    shape.n_embd = dims[2];
    shape.n_head = dims[3];
    shape.n_layer = dims[4];
    shape.n_ff = dims[5];
    const gpt2::Config config = gpt2::ConfigFromHfJson(TinyConfigJson(shape));
    // The released size this shape takes its width and heads from.
    const gpt2::ReleasedGpt2* released = gpt2::FindReleasedGpt2(("gpt2-" + name).c_str());
    REQUIRE(released != nullptr);
    CHECK(config.n_embd == released->n_embd);
    CHECK(config.n_head == released->n_head);

    std::vector<HfTensor> hf = GoldenCheckpointAsHf(config);
    std::vector<StEntry> entries;
    for (HfTensor& t : hf) entries.push_back(Encode(&t, "F32", ""));
    hf.clear();
    const std::vector<uint8_t> st = WriteSafetensors(entries);
    entries.clear();

    const uint64_t header_end = gpt2::SafetensorsFile::HeaderEnd(st.data(), st.size(), st.size());
    gpt2::Gpt2GgufStream stream(st.data(), static_cast<size_t>(header_end), st.size(), config,
                                nullptr, TensorType::kF32, "", uint64_t{1} << 31);
    while (!stream.done()) {
      const gpt2::Gpt2GgufStream::Range r = stream.next();
      stream.Feed(st.data() + r.offset, r.bytes);
    }
    std::vector<uint8_t> bytes;
    {
      auto checkpoint = gpt2::SafetensorsFile::Parse(st.data(), st.size(), "family.safetensors");
      gpt2::GgufWriter writer;
      gpt2::BuildGpt2Gguf(*checkpoint, config, nullptr, TensorType::kF32, &writer, nullptr);
      bytes = writer.Serialize();
    }
    REQUIRE(stream.output_size() == bytes.size());
    CHECK(std::memcmp(stream.output(), bytes.data(), bytes.size()) == 0);

    std::shared_ptr<const gpt2::GgufFile> file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
    auto model = gpt2::Model::FromGguf(file);
    const std::vector<int32_t>& ids32 = golden.I32(name + "/ids");
    std::vector<int> ids(ids32.begin(), ids32.end());
    const std::vector<float>& want = golden.F32(name + "/logits");
    const size_t V = config.n_vocab;
    REQUIRE(want.size() == ids.size() * V);
    std::vector<float> all;
    gpt2::RunOptions run;
    run.observer = [&](const gpt2::Activation& a) {
      if (std::string(a.name) == "logits") all.assign(a.data, a.data + a.shape[0] * a.shape[1]);
    };
    gpt2::Session session(*model);
    const float* logits = session.Prefill(ids.data(), static_cast<int>(ids.size()), run);
    REQUIRE(all.size() == want.size());
    // Within 1e-5 of the logits' scale: a width of 1600 sums that many float32 products, whose
    // order differs from PyTorch's, and these logits reach a few tens.
    float scale = 1.0f;
    for (float v : want) scale = std::max(scale, std::fabs(v));
    INFO("largest |logit| " << scale);
    CHECK(gpt2_test::CheckTensor("logits", all.data(), want.data(),
                                 static_cast<int64_t>(want.size()), 1e-5 * scale));

    const std::vector<int32_t>& greedy = golden.I32(name + "/greedy");
    std::vector<int> got;
    for (size_t i = 0; i < greedy.size(); ++i) {
      got.push_back(static_cast<int>(std::max_element(logits, logits + V) - logits));
      logits = session.Step(got.back());
    }
    CHECK(got == std::vector<int>(greedy.begin(), greedy.end()));
  }
}

}  // namespace
