// The KV cache (model/kv_cache.h) in each number format against the scalar twins of the
// attention kernels (kernels/reference.h) over keys and values rounded and laid out here, one
// head at a time: every head of every block, queries in chunks of 1 to 20 (an f16 chunk of 16 or
// more is widened to f32 once), keys read at a stride as the session reads them from q | k | v.
// Then what the capture store relies on: a keys-only cache, and one grown on the way, give the
// full cache's probabilities to the bit.
#include "model/kv_cache.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "model/config.h"

namespace gpt2_test {
namespace {

using gpt2::Config;
using gpt2::HeadQueries;
using gpt2::KvCache;

// The kernels' budgets against their scalar twins (tests/kernels/kernels_test.cc): Exp within
// 4 ulp plus float sums in another order.
constexpr double kProbAbsTol = 1e-7;
constexpr double kProbRelTol = 1e-5;
constexpr double kScoreAbsTol = 1e-5;
constexpr double kScoreRelTol = 1e-5;
constexpr double kAttentionOutAbsTol = 1e-5;

bool Near(double got, double want, double abs_tol, double rel_tol) {
  return std::fabs(got - want) <= abs_tol + rel_tol * std::fabs(want);
}

// Two blocks of three heads of 40 numbers (one whole 8-bit block and a short one), for an odd
// context (the 8-bit cache rounds its capacity up to even).
Config SmallConfig(Config::KvCache format) {
  Config c;
  c.n_vocab = 10;
  c.n_ctx = 45;
  c.n_embd = 120;
  c.n_head = 3;
  c.n_layer = 2;
  c.n_ff = 4;
  c.kv_cache = format;
  return c;
}

const char* FormatName(Config::KvCache format) {
  switch (format) {
    case Config::KvCache::kF32:
      return "f32";
    case Config::KvCache::kF16:
      return "f16";
    case Config::KvCache::kQ8_0:
      return "q8_0";
  }
  return "?";
}

constexpr Config::KvCache kFormats[] = {Config::KvCache::kF32, Config::KvCache::kF16,
                                        Config::KvCache::kQ8_0};
// Queries per call: decode steps, a short chunk, chunks past KvCache::kWidenKvFrom; 45 in all.
constexpr int kChunks[] = {1, 3, 17, 1, 20, 3};

// Every block's q | k | v rows [n_ctx, 3C] as the session's qkv matmul lays them out, in the
// kernels' tests' range (their budgets are absolute); every 7th key 4 times larger, so that
// softmax has clear winners.
std::vector<std::vector<float>> RandomQkv(const Config& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<std::vector<float>> qkv(c.n_layer,
                                      std::vector<float>(size_t(c.n_ctx) * 3 * c.n_embd));
  const int64_t C = c.n_embd;
  for (auto& block : qkv) {
    for (float& x : block) x = u(rng);
    for (int64_t t = 0; t < c.n_ctx; t += 7) {
      for (int64_t i = C; i < 2 * C; ++i) block[t * 3 * C + i] *= 4.0f;
    }
  }
  return qkv;
}

// Head h's keys or values (part 1 or 2) of positions [0, n) of one block, [n, D].
std::vector<float> HeadRows(const std::vector<float>& qkv, const Config& c, int part, int64_t h,
                            int64_t n) {
  const int64_t C = c.n_embd, D = c.head_dim();
  std::vector<float> rows(size_t(n * D));
  for (int64_t t = 0; t < n; ++t) {
    std::copy_n(qkv.data() + t * 3 * C + part * C + h * D, D, rows.data() + t * D);
  }
  return rows;
}

// The scalar twin's attention of query `q` at position p over head h's rows 0..p, with keys and
// values rounded to the format here: f16 by reference::F32ToF16Saturated, 8 bits by
// StoreKeyQ8/StoreValueQ8 into a head cache of another capacity than the KvCache's.
void Reference(const Config& c, const std::vector<float>& k, const std::vector<float>& v,
               const float* q, int64_t p, float* scores, float* probs, float* out) {
  const int64_t D = c.head_dim(), n = p + 1;
  const float scale = c.attn_scale();
  switch (c.kv_cache) {
    case Config::KvCache::kF32:
      gpt2::reference::AttentionHead(q, k.data(), v.data(), D, n, D, scale, scores, probs, out);
      break;
    case Config::KvCache::kF16: {
      std::vector<uint16_t> k16(size_t(n * D)), v16(k16.size());
      gpt2::reference::F32ToF16Saturated(k.data(), k16.data(), n * D);
      gpt2::reference::F32ToF16Saturated(v.data(), v16.data(), n * D);
      gpt2::reference::AttentionHead(q, k16.data(), v16.data(), D, n, D, scale, scores, probs, out);
      break;
    }
    case Config::KvCache::kQ8_0: {
      const int64_t capacity = 64, nb = gpt2::KvBlocks(D);
      std::vector<int8_t> kq(size_t(capacity * nb * gpt2::kKvBlock)), vq(kq.size());
      std::vector<uint16_t> kd(size_t(capacity * nb)), vd(kd.size());
      for (int64_t j = 0; j < n; ++j) {
        gpt2::StoreKeyQ8(k.data() + j * D, D, j, kq.data(), kd.data(), capacity);
        gpt2::StoreValueQ8(v.data() + j * D, D, j, vq.data(), vd.data(), capacity);
      }
      gpt2::reference::AttentionHead(q, gpt2::KvHeadQ8{kq.data(), kd.data(), capacity},
                                     gpt2::KvHeadQ8{vq.data(), vd.data(), capacity}, n, D, scale,
                                     scores, probs, out);
      break;
    }
  }
}

TEST_CASE("the KV cache stores and attends as the scalar twins over the format's rounding",
          "[model][kv_cache]") {
  for (Config::KvCache format : kFormats) {
    const Config c = SmallConfig(format);
    INFO("format " << FormatName(format));
    const int64_t C = c.n_embd, D = c.head_dim(), P = c.n_ctx;
    const std::vector<std::vector<float>> qkv = RandomQkv(c, 7);
    KvCache cache(c, P);
    CHECK(cache.format() == format);
    CHECK(cache.capacity() == (format == Config::KvCache::kQ8_0 ? 46 : 45));
    int64_t pos0 = 0;
    for (int n : kChunks) {
      for (int l = 0; l < c.n_layer; ++l) {
        for (int64_t h = 0; h < c.n_head; ++h) {
          INFO("block " << l << " head " << h << " positions " << pos0 << ".." << pos0 + n - 1);
          const float* rows = qkv[l].data() + pos0 * 3 * C + h * D;
          cache.Store(l, h, pos0, n, rows + C, rows + 2 * C, 3 * C);
          // Outputs at strides of their own, scores and probabilities over every key of the chunk.
          const int64_t n_keys = pos0 + n, out_stride = D + 3;
          std::vector<float> scores(size_t(n * n_keys), -7.0f), probs(scores.size(), -7.0f);
          std::vector<float> out(size_t(n * out_stride), -7.0f);
          HeadQueries io;
          io.q = rows;
          io.q_stride = 3 * C;
          io.out = out.data();
          io.out_stride = out_stride;
          io.probs = probs.data();
          io.probs_stride = n_keys;
          io.scores = scores.data();
          io.scores_stride = n_keys;
          cache.Attend(l, h, pos0, n, io);

          const std::vector<float> k = HeadRows(qkv[l], c, 1, h, n_keys);
          const std::vector<float> v = HeadRows(qkv[l], c, 2, h, n_keys);
          int bad = 0;
          for (int64_t t = 0; t < n; ++t) {
            const int64_t p = pos0 + t;
            std::vector<float> want_scores(size_t(p + 1)), want_probs(size_t(p + 1));
            std::vector<float> want_out(static_cast<size_t>(D));
            Reference(c, k, v, rows + t * 3 * C, p, want_scores.data(), want_probs.data(),
                      want_out.data());
            for (int64_t j = 0; j <= p; ++j) {
              if (!Near(scores[t * n_keys + j], want_scores[j], kScoreAbsTol, kScoreRelTol)) ++bad;
              if (!Near(probs[t * n_keys + j], want_probs[j], kProbAbsTol, kProbRelTol)) ++bad;
            }
            for (int64_t j = p + 1; j < n_keys; ++j) {  // keys query t may not see: untouched
              if (scores[t * n_keys + j] != -7.0f || probs[t * n_keys + j] != -7.0f) ++bad;
            }
            for (int64_t d = 0; d < D; ++d) {
              if (!Near(out[t * out_stride + d], want_out[d], kAttentionOutAbsTol, 0.0)) ++bad;
            }
            for (int64_t d = D; d < out_stride && t + 1 < n; ++d) {
              if (out[t * out_stride + d] != -7.0f) ++bad;
            }
          }
          CHECK(bad == 0);
        }
      }
      pos0 += n;
    }
    REQUIRE(pos0 == P);
  }
}

// One query at position p over head h of block l of a cache: its scores, probabilities and
// (with values) output.
struct Attended {
  std::vector<float> scores, probs, out;
};
Attended AttendOne(const KvCache& cache, const Config& c, int l, int64_t h, const float* q,
                   int64_t p, bool values) {
  Attended a{std::vector<float>(size_t(p + 1)), std::vector<float>(size_t(p + 1)),
             std::vector<float>(values ? size_t(c.head_dim()) : 0)};
  HeadQueries io;
  io.q = q;
  io.probs = a.probs.data();
  io.scores = a.scores.data();
  io.out = values ? a.out.data() : nullptr;
  cache.Attend(l, h, p, 1, io);
  return a;
}

TEST_CASE("a keys-only KV cache, grown on the way, gives the full cache's probabilities to the bit",
          "[model][kv_cache]") {
  for (Config::KvCache format : kFormats) {
    const Config c = SmallConfig(format);
    INFO("format " << FormatName(format));
    const int64_t C = c.n_embd, D = c.head_dim(), P = c.n_ctx;
    const std::vector<std::vector<float>> qkv = RandomQkv(c, 11);
    KvCache full(c, P);
    // Grown from 5 positions as the capture store grows its keys, and a full one grown alike.
    KvCache keys(c, 5, KvCache::Parts::kKeys), grown(c, 5);
    int64_t pos0 = 0;
    for (int n : kChunks) {
      if (pos0 + n > keys.capacity()) keys.Grow(std::max<int64_t>(pos0 + n, 2 * keys.capacity()));
      grown.Grow(pos0 + n);
      REQUIRE(keys.capacity() >= pos0 + n);
      REQUIRE(grown.capacity() >= pos0 + n);
      for (int l = 0; l < c.n_layer; ++l) {
        for (int64_t h = 0; h < c.n_head; ++h) {
          const float* rows = qkv[l].data() + pos0 * 3 * C + h * D;
          full.Store(l, h, pos0, n, rows + C, rows + 2 * C, 3 * C);
          keys.Store(l, h, pos0, n, rows + C, nullptr, 3 * C);
          grown.Store(l, h, pos0, n, rows + C, rows + 2 * C, 3 * C);
          // The chunk's queries in one call (widened f16 from 16 on) and one at a time.
          std::vector<float> probs(size_t(n) * (pos0 + n)), out(size_t(n * D));
          HeadQueries io;
          io.q = rows;
          io.q_stride = 3 * C;
          io.out = out.data();
          io.out_stride = D;
          io.probs = probs.data();
          io.probs_stride = pos0 + n;
          full.Attend(l, h, pos0, n, io);
          for (int64_t t = 0; t < n; ++t) {
            const int64_t p = pos0 + t;
            INFO("block " << l << " head " << h << " position " << p);
            const float* q = rows + t * 3 * C;
            const Attended want = AttendOne(full, c, l, h, q, p, true);
            const Attended got_keys = AttendOne(keys, c, l, h, q, p, false);
            const Attended got_grown = AttendOne(grown, c, l, h, q, p, true);
            const size_t bytes = size_t(p + 1) * sizeof(float);
            CHECK(std::memcmp(probs.data() + t * (pos0 + n), want.probs.data(), bytes) == 0);
            CHECK(std::memcmp(out.data() + t * D, want.out.data(), D * sizeof(float)) == 0);
            CHECK(std::memcmp(got_keys.probs.data(), want.probs.data(), bytes) == 0);
            CHECK(std::memcmp(got_keys.scores.data(), want.scores.data(), bytes) == 0);
            CHECK(std::memcmp(got_grown.probs.data(), want.probs.data(), bytes) == 0);
            CHECK(std::memcmp(got_grown.out.data(), want.out.data(), D * sizeof(float)) == 0);
          }
        }
      }
      pos0 += n;
    }
  }
}

}  // namespace
}  // namespace gpt2_test
