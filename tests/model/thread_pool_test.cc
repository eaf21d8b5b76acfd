// The thread pool carries a task's exception to the caller (model/thread_pool.h). Runs natively,
// in the single-threaded wasm suite (everything inline) and in gpt2_thread_tests, the pthreads
// wasm build under Node (CMakeLists.txt), where the throwing tasks run on Web Workers.
#include "model/thread_pool.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "base/error.h"
#include "format/quant.h"
#include "kernels/kernels.h"

namespace gpt2_test {
namespace {

// Threads the build can actually start: 1 in the single-threaded wasm build.
int ExpectedThreads() {
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
  return 1;
#else
  return 4;
#endif
}

TEST_CASE("thread pool runs every task once", "[model][threads]") {
  gpt2::ThreadPool pool(4);
  REQUIRE(pool.size() == ExpectedThreads());
  std::atomic<int64_t> sum{0};
  pool.ParallelFor(1000, [&](int64_t t) { sum += t + 1; });
  CHECK(sum == 1000 * 1001 / 2);
}

TEST_CASE("an exception thrown by a task reaches the caller", "[model][threads]") {
  gpt2::ThreadPool pool(4);
  std::atomic<int> ran{0};
  CHECK_THROWS_WITH(pool.ParallelFor(200,
                                     [&](int64_t t) {
                                       ++ran;
                                       if (t == 7) throw gpt2::Error("task 7 failed");
                                     }),
                    "task 7 failed");
  // Tasks handed out after the failure are skipped; never more than were asked.
  CHECK(ran <= 200);

  // bad_alloc keeps its type, so the page's out-of-memory message can be chosen for it.
  CHECK_THROWS_AS(pool.ParallelFor(50,
                                   [](int64_t t) {
                                     if (t % 3 == 1) throw std::bad_alloc();
                                   }),
                  std::bad_alloc);

  // Every task throwing: one exception arrives, nothing hangs, and the pool is still usable.
  CHECK_THROWS_AS(pool.ParallelFor(64, [](int64_t) { throw gpt2::Error("all fail"); }),
                  gpt2::Error);
  std::atomic<int> count{0};
  pool.ParallelFor(100, [&](int64_t) { ++count; });
  CHECK(count == 100);
}

TEST_CASE("an exception thrown on a worker thread reaches the caller", "[model][threads]") {
  gpt2::ThreadPool pool(4);
  if (pool.size() == 1) {
    WARN("this build has no threads: every task runs on the caller");
    return;
  }
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> thrown_on_worker{false};
  // Tasks wait briefly so the workers take some; only tasks on a worker throw.
  CHECK_THROWS_WITH(pool.ParallelFor(400,
                                     [&](int64_t) {
                                       std::this_thread::sleep_for(std::chrono::microseconds(200));
                                       if (std::this_thread::get_id() != caller) {
                                         thrown_on_worker = true;
                                         throw gpt2::Error("failed on a worker");
                                       }
                                     }),
                    "failed on a worker");
  CHECK(thrown_on_worker);
  std::atomic<int> count{0};
  pool.ParallelFor(100, [&](int64_t) { ++count; });
  CHECK(count == 100);
}

// What MatMulOn (model/matmul_on.h) does: one MatMulInput quantized by token ranges on the pool's
// threads, then read by all of them for row ranges split at kMatMulRowGrain. In the pthreads
// wasm build the tasks run on Web Workers, each with its own thread_local scratch and stack.
TEST_CASE("threads sharing one prepared matmul input give one call's bits", "[model][threads]") {
  constexpr int64_t kRows = 3 * gpt2::kMatMulRowGrain + 10, kCols = 256, kMaxT = 37;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> dense(kRows * kCols), x(kMaxT * kCols), bias(kRows);
  for (float& v : dense) v = normal(rng);
  for (float& v : x) v = normal(rng);
  for (float& v : bias) v = normal(rng);
  std::vector<gpt2::BlockQ8_0> q8(kRows * kCols / 32);
  std::vector<gpt2::BlockQ4_0> q4(kRows * kCols / 32);
  gpt2::QuantizeRowQ8_0(dense.data(), q8.data(), kRows * kCols);
  gpt2::QuantizeRowQ4_0(dense.data(), q4.data(), kRows * kCols);
  gpt2::ThreadPool pool(4);
  for (const gpt2::WeightView& w :
       {gpt2::WeightView{gpt2::TensorType::kQ8_0, q8.data(), kRows, kCols},
        gpt2::WeightView{gpt2::TensorType::kQ4_0, q4.data(), kRows, kCols},
        gpt2::WeightView{gpt2::TensorType::kF32, dense.data(), kRows, kCols}}) {
    for (int64_t T : {int64_t{1}, kMaxT}) {
      INFO("weight type id " << int(w.type) << " T " << T);
      std::vector<float> want(T * kRows), got(T * kRows, -1.0f);
      gpt2::MatMul(x.data(), T, w, bias.data(), want.data(), 0, kRows);
      gpt2::MatMulInput in;
      gpt2::StartMatMulInput(x.data(), T, w, gpt2::QuantActivations::kInt8, in);
      pool.ParallelFor(4, [&](int64_t part) {
        gpt2::PrepareMatMulInputRows(in, T * part / 4, T * (part + 1) / 4);
      });
      pool.ParallelFor(4, [&](int64_t chunk) {
        const int64_t begin = chunk * gpt2::kMatMulRowGrain;
        gpt2::MatMul(in, w, bias.data(), got.data(), begin,
                     chunk == 3 ? kRows : begin + gpt2::kMatMulRowGrain);
      });
      CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
    }
  }
}

}  // namespace
}  // namespace gpt2_test
