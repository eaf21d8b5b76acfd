// A file that arrives in chunks of known total size (the page's download of a model or of a
// Hugging Face checkpoint), held in one allocation, 64-byte aligned so GGUF's 32-byte tensor
// alignment holds in memory as in the file. The bindings copy each chunk straight into Append's
// place; the errors name the file and the call that starts it, as the page's user knows them.
//
// In the pthreads module a second thread writes the buffer's pages in from its end while the chunks
// are copied in from its start. Fresh wasm memory costs the OS a page fault at the first write to
// each 4 KiB (~400 ms of a cached reload of GPT-2 small: BENCHMARKS-history.md "Where a cached
// reload's time went"), and two threads take the faults side by side. Each touch is an atomic
// compare-exchange of 0 with 0 on one word: a write (x86's locked read-modify-write always writes)
// that leaves whatever the copy has put there. If no pool thread is free the copy faults the pages
// itself, as in the single-threaded module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#ifdef __EMSCRIPTEN_PTHREADS__
#include <atomic>
#include <thread>
#endif

namespace gpt2 {

class ArrivingFile {
 public:
  // `what` names the file in errors ("The model", "model.safetensors"); `begin` the JS call
  // that starts it.
  ArrivingFile(std::string what, std::string begin)
      : what_(std::move(what)), begin_(std::move(begin)) {}
  ArrivingFile(const ArrivingFile&) = delete;
  ~ArrivingFile() { Free(); }

  // Frees what was held and allocates total_bytes (a JS number: anything not in (0, 4 GB) is
  // refused); throws gpt2::Error when that cannot be.
  void Begin(double total_bytes);
  // Where the next n bytes go, counted as arrived: the caller copies them there at once. Throws
  // when they would pass the announced size.
  uint8_t* Append(size_t n);
  // Throws unless every announced byte arrived. Gives the touching thread back to the pool
  // (the session about to be made needs it).
  void RequireComplete();
  void Free();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  size_t filled() const { return filled_; }

 private:
  void StartTouching();
  void StopTouching();
#ifdef __EMSCRIPTEN_PTHREADS__
  size_t filled_at_least() const { return filled_progress_.load(std::memory_order_relaxed); }
  std::thread toucher_;
  std::atomic<bool> stop_touching_{false};
  std::atomic<size_t> filled_progress_{0};  // filled_, as the touching thread may read it
#endif

  const std::string what_, begin_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t filled_ = 0;
};

}  // namespace gpt2
