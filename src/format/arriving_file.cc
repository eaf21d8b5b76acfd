#include "format/arriving_file.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#ifdef __EMSCRIPTEN_PTHREADS__
#include <system_error>
#endif

#include "base/error.h"
#include "base/memory_limit.h"

namespace gpt2 {

void ArrivingFile::Begin(double total_bytes) {
  Free();
  if (!(total_bytes > 0) || total_bytes > static_cast<double>(kWasmMemoryBudget)) {
    char shown[64];  // any JS number, NaN and 1e300 included
    std::snprintf(shown, sizeof shown, "%.0f", total_bytes);
    throw Error(
        what_ + " (" + shown +
        " bytes) is not something this page can load: WebAssembly memory is limited to 4 GB.");
  }
  size_ = static_cast<size_t>(total_bytes);
  data_ = static_cast<uint8_t*>(std::aligned_alloc(64, (size_ + 63) & ~size_t{63}));
  if (data_ == nullptr) {
    size_ = 0;
    throw Error("Not enough memory to hold " + what_ + " (" +
                std::to_string(static_cast<int64_t>(total_bytes) >> 20) +
                " MB): the browser tab could not allocate it. Close other tabs or try a smaller "
                "model (q8_0 or q4_0).");
  }
  StartTouching();
}

uint8_t* ArrivingFile::Append(size_t n) {
  if (data_ == nullptr) throw Error("appendChunk called before " + begin_);
  if (n > size_ - filled_) {
    throw Error(what_ + " download is larger than announced (" + std::to_string(size_) +
                " bytes); the server's size information is wrong.");
  }
  uint8_t* at = data_ + filled_;
  filled_ += n;
#ifdef __EMSCRIPTEN_PTHREADS__
  filled_progress_.store(filled_, std::memory_order_relaxed);
#endif
  return at;
}

void ArrivingFile::RequireComplete() {
  StopTouching();
  if (data_ == nullptr) throw Error(begin_ + " was not called");
  if (filled_ != size_) {
    throw Error(what_ + " is incomplete: received " + std::to_string(filled_) + " of " +
                std::to_string(size_) + " bytes.");
  }
}

void ArrivingFile::Free() {
  StopTouching();
  std::free(data_);
  data_ = nullptr;
  size_ = filled_ = 0;
}

#ifdef __EMSCRIPTEN_PTHREADS__
void ArrivingFile::StartTouching() {
  stop_touching_.store(false);
  filled_progress_.store(0);
  const size_t words = size_ / sizeof(int32_t);
  int32_t* words_begin = reinterpret_cast<int32_t*>(data_);
  try {
    toucher_ = std::thread([this, words_begin, words] {
      constexpr size_t kPageWords = 4096 / sizeof(int32_t);
      for (size_t i = words; i >= kPageWords && !stop_touching_.load(std::memory_order_relaxed);) {
        i -= kPageWords;
        // Once the copy has passed this page the rest are faulted in already.
        if (i * sizeof(int32_t) < filled_at_least()) break;
        int32_t expected = 0;
        __atomic_compare_exchange_n(words_begin + i, &expected, 0, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED);
      }
    });
  } catch (const std::system_error&) {
    // No free pool thread (PTHREAD_POOL_SIZE_STRICT): the copy faults the pages in itself.
  }
}

void ArrivingFile::StopTouching() {
  stop_touching_.store(true);
  if (toucher_.joinable()) toucher_.join();
}
#else
void ArrivingFile::StartTouching() {}
void ArrivingFile::StopTouching() {}
#endif

}  // namespace gpt2
