// A fixed set of worker threads for splitting one kernel call (a matmul's rows, attention's
// heads) across cores. Created once per Session; ParallelFor allocates nothing, so the token
// loop stays allocation-free. With one thread everything runs inline on the caller, which is
// also what the single-threaded WebAssembly build uses (no pthreads there).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpt2 {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(task) for task in [0, n_tasks), spread over the threads; returns when all are done.
  // If a task throws (a kernel's argument check, a scratch buffer's bad_alloc), tasks not yet
  // started are skipped and the first exception is rethrown here, on the caller's thread: an
  // exception escaping a std::thread would call std::terminate (natively) or abort the whole
  // threaded WebAssembly module, before any caller could report it.
  void ParallelFor(int64_t n_tasks, const std::function<void(int64_t)>& fn);

 private:
  void WorkerLoop(int worker);
  void RunTasks();
  // Spins until done() holds, for kSpinMicros at most (the caller then blocks as before).
  template <typename Done>
  static void SpinUntil(const Done& done);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t n_tasks_ = 0;
  int64_t next_task_ = 0;
  // Written under mutex_; atomic so that a spinning thread may read them without it.
  std::atomic<int> busy_workers_{0};
  std::exception_ptr error_;  // the first exception a task of the current job threw
  std::atomic<uint64_t> generation_{0};
  bool stopping_ = false;
};

}  // namespace gpt2
