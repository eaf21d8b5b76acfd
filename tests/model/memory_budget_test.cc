// Model acceptance against a memory budget (model/config.h PlanMemory, CheckMemoryBudget):
// buffer sizes come from file values, and in the WebAssembly build size_t is 32 bits, so a
// product past 2^32 used to wrap into a tiny allocation that the forward pass then overran.
// Expected sizes are written out by hand from Session::Buffers and the page's CaptureStore.
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/error.h"
#include "format/gguf.h"
#include "format/tensor_type.h"
#include "model/config.h"
#include "model/model.h"
#include "tools/common/synthetic_model.h"

namespace gpt2_test {
namespace {

constexpr int64_t kWasmBudget = gpt2::kWasmMemoryBudget;  // -sMAXIMUM_MEMORY=4GB less 64 kB

// n_ctx * n_ff = 2^16 * 2^16 = 2^32: the MLP hidden buffer size_t(n_ctx) * n_ff is 0 in wasm32,
// yet every tensor is small (1 block, 32-wide embedding: about 10 MB of file).
gpt2::Config WrappingConfig() {
  gpt2::Config c;
  c.n_vocab = 64;
  c.n_ctx = 1 << 16;
  c.n_embd = 32;
  c.n_head = 1;
  c.n_layer = 1;
  c.n_ff = 1 << 16;
  return c;
}

TEST_CASE("memory plan of GPT-2 small matches its buffers", "[model][memory]") {
  const gpt2::Config c = gpt2::Gpt2SmallConfig();
  const gpt2::MemoryPlan plan = gpt2::PlanMemory(c);
  // x, xn, heads, tmp [1024, 768]; qkv [1024, 2304]; ff [1024, 3072]; k and v [12, 1024, 768];
  // scores and probs [12, 1024]; logits [50257]; all 4-byte floats.
  const int64_t session = 4 * (4 * 1024 * 768 + 1024 * 2304 + 1024 * 3072 +
                               2 * int64_t{12} * 1024 * 768 + 2 * 12 * 1024 + 50257);
  CHECK(plan.session_bytes == session);
  // Observed logits [1024, 50257] and scores/probs [12, 1024, 1024].
  CHECK(plan.observer_bytes == 4 * (int64_t{1024} * 50257 + 2 * int64_t{12} * 1024 * 1024));
  // Per block: queries and keys 24 x [1024, 768], residuals 25 x [1024, 768], MLP [1024, 3072];
  // one attention row [12, 1024]; plus top-10 ids and probabilities per position.
  CHECK(plan.capture_bytes ==
        4 * (24 * 1024 * 768 + 12 * 1024 + 25 * 1024 * 768 + 12 * 1024 * 3072 + 2 * 1024 * 10));
  CHECK(plan.largest_buffer_bytes == 4 * int64_t{1024} * 50257);
  // GPT-2 small as Q8_0 (about 170 MB) fits the page.
  CHECK_NOTHROW(gpt2::CheckMemoryBudget(c, 170u << 20, kWasmBudget));
}

TEST_CASE("the KV cache and captured keys take the weights' precision", "[model][memory]") {
  using KvCache = gpt2::Config::KvCache;
  const std::pair<gpt2::TensorType, KvCache> kinds[] = {{gpt2::TensorType::kF32, KvCache::kF32},
                                                        {gpt2::TensorType::kF16, KvCache::kF16},
                                                        {gpt2::TensorType::kQ8_0, KvCache::kQ8_0},
                                                        {gpt2::TensorType::kQ4_0, KvCache::kQ8_0}};
  for (const auto& [type, kv] : kinds) {
    const std::vector<uint8_t> bytes =
        gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), type, nullptr);
    std::shared_ptr<const gpt2::GgufFile> file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
    CHECK(gpt2::Config::FromGguf(*file).kv_cache == kv);
  }
  gpt2::Config c = gpt2::Gpt2SmallConfig();
  REQUIRE(c.kv_cache == KvCache::kF32);
  const gpt2::MemoryPlan f32 = gpt2::PlanMemory(c);
  c.kv_cache = KvCache::kF16;
  const gpt2::MemoryPlan f16 = gpt2::PlanMemory(c);
  c.kv_cache = KvCache::kQ8_0;
  const gpt2::MemoryPlan q8 = gpt2::PlanMemory(c);
  // k and v [12, 1024, 768] at 2 bytes instead of 4; the store's keys [12][1024, 768] likewise.
  CHECK(f32.session_bytes - f16.session_bytes == 2 * 2 * int64_t{12} * 1024 * 768);
  CHECK(f32.capture_bytes - f16.capture_bytes == 2 * int64_t{12} * 1024 * 768);
  // 8 bits: each head's 64 numbers of a position are 2 blocks of 32 quants and an f16 scale.
  const int64_t q8_row = 2 * (32 + 2);
  CHECK(f32.session_bytes - q8.session_bytes == 2 * int64_t{12} * 1024 * (768 * 4 - 12 * q8_row));
  CHECK(f32.capture_bytes - q8.capture_bytes == int64_t{12} * 1024 * (768 * 4 - 12 * q8_row));
  CHECK(c.kv_bytes_per_value() == 1.0625);
  CHECK(f16.observer_bytes == f32.observer_bytes);
  CHECK(q8.observer_bytes == f32.observer_bytes);
}

TEST_CASE("GPT-2 XL fits the page's 4 GB as Q8_0 and F16, not as F32", "[model][memory]") {
  const gpt2::ReleasedGpt2* released = gpt2::FindReleasedGpt2("gpt2-xl");
  REQUIRE(released != nullptr);
  gpt2::Config xl = released->config();
  // Files of 1.66 GB and 3.1 GB with 8-bit and f16 KV caches (167 MB, 315 MB at full context).
  xl.kv_cache = gpt2::Config::KvCache::kQ8_0;
  CHECK_NOTHROW(gpt2::CheckMemoryBudget(xl, uint64_t{1663} << 20, kWasmBudget));
  xl.kv_cache = gpt2::Config::KvCache::kF16;
  CHECK_NOTHROW(gpt2::CheckMemoryBudget(xl, uint64_t{3120} << 20, kWasmBudget));
  // 6.2 GB of F32 weights do not.
  xl.kv_cache = gpt2::Config::KvCache::kF32;
  CHECK_THROWS_WITH(gpt2::CheckMemoryBudget(xl, uint64_t{6230} << 20, kWasmBudget),
                    Catch::Contains("too large for") && Catch::Contains("4096 MB"));
  // Every buffer the budget admits has a size a 32-bit size_t holds.
  CHECK(kWasmBudget < (int64_t{1} << 32));
}

TEST_CASE("a GGUF whose buffer sizes pass 2^32 with small tensors is refused", "[model][memory]") {
  const gpt2::Config c = WrappingConfig();
  // What the old size_t arithmetic computed in a 32-bit build.
  REQUIRE(static_cast<uint32_t>(uint64_t(c.n_ctx) * uint64_t(c.n_ff)) == 0);

  const std::vector<uint8_t> bytes = gpt2::SyntheticModelBytes(c, gpt2::TensorType::kQ4_0, nullptr);
  REQUIRE(bytes.size() < (16u << 20));
  std::shared_ptr<const gpt2::GgufFile> file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
  CHECK(file->size() == bytes.size());

  const gpt2::MemoryPlan plan = gpt2::PlanMemory(gpt2::Config::FromGguf(*file));
  CHECK(plan.session_bytes >= 4 * (int64_t{1} << 32));  // the MLP hidden buffer alone: 16 GB

  CHECK_THROWS_WITH(gpt2::Model::FromGguf(file, kWasmBudget),
                    Catch::Contains("too large for") && Catch::Contains("65536"));
#ifdef __EMSCRIPTEN__
  // The default budget of the WebAssembly build is the page's: refused without being told.
  CHECK_THROWS_WITH(gpt2::Model::FromGguf(file), Catch::Contains("too large for this page"));
#endif
  // The parse and the binding themselves are sound: with a budget that holds it, it loads.
  CHECK_NOTHROW(gpt2::Model::FromGguf(file, int64_t{1} << 50));
}

TEST_CASE("one buffer larger than the budget is refused even when the session fits",
          "[model][memory]") {
  // A long context makes the observer's attention scores [H, n_ctx, n_ctx] 16 GB, while the
  // session itself (no MLP width, small embedding) is a few MB.
  gpt2::Config c = WrappingConfig();
  c.n_ff = 32;
  const gpt2::MemoryPlan plan = gpt2::PlanMemory(c);
  REQUIRE(plan.session_bytes < (128 << 20));
  CHECK(plan.largest_buffer_bytes >= 4 * (int64_t{1} << 32));
  CHECK_THROWS_WITH(gpt2::CheckMemoryBudget(c, 1 << 20, kWasmBudget),
                    Catch::Contains("too large for") && Catch::Contains("at full context"));
}

}  // namespace
}  // namespace gpt2_test
