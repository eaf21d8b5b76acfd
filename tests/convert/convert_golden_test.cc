// The whole import path against PyTorch: the tiny golden model written as a Hugging Face
// checkpoint (model.safetensors layout, Conv1D weights [in, out]), converted by our converter,
// loaded and run, must give the logits scripts/make_golden.py computed with PyTorch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "convert/convert_test_util.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "model/golden_file.h"
#include "model/model.h"
#include "test_paths.h"
#include "convert/convert.h"
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

  const auto golden = gpt2_test::GoldenFile::Load(gpt2_test::DataPath("golden_tiny.bin"));
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
    gpt2::BuildGpt2Gguf(*checkpoint, gpt2::ConfigFromHfJson(TinyConfigJson(shape)), nullptr,
                        c.type, &writer, nullptr);
    const std::vector<uint8_t> bytes = writer.Serialize();
    std::shared_ptr<const gpt2::GgufFile> file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
    auto model = gpt2::Model::FromGguf(file);
    gpt2::Session session(*model);
    const float* logits = session.Prefill(ids.data(), static_cast<int>(ids.size()));
    CHECK(gpt2_test::CheckTensor("converted logits", logits, want.data() + last, V, c.tolerance));
  }
}

}  // namespace
