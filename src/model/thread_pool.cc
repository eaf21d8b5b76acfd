#include "model/thread_pool.h"

#include <chrono>
#include <system_error>

namespace gpt2 {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  // Where threads cannot be made (a WebAssembly build without pthreads), fewer workers, down to
  // the caller alone, still run every task.
  for (int i = 1; i < n_threads_; ++i) {
    try {
      workers_.emplace_back([this, i] { WorkerLoop(i); });
    } catch (const std::system_error&) {
      break;
    }
  }
  n_threads_ = static_cast<int>(workers_.size()) + 1;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

// Tasks are handed out one at a time under the lock: the tasks are coarse (a block of matmul
// rows, a head), so the lock is not the bottleneck and load balances itself.
void ThreadPool::RunTasks() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (next_task_ < n_tasks_) {
    const int64_t task = next_task_++;
    const auto* job = job_;
    lock.unlock();
    try {
      (*job)(task);
    } catch (...) {
      lock.lock();
      if (!error_) error_ = std::current_exception();
      next_task_ = n_tasks_;  // the job has failed: start no more of its tasks
      continue;
    }
    lock.lock();
  }
}

// A decode step hands the pool ~60 jobs of ~100 us each, a few microseconds apart. Waking a
// thread blocked on a condition variable takes tens of microseconds (a futex; in WebAssembly
// Atomics.wait/notify), and by then the caller has taken most of the job's tasks itself. So
// both sides spin for a short while before they block: a worker waiting for the next job, the
// caller waiting for the workers' last tasks. Short, because a spinning thread that shares its
// core with the thread it waits for (a busy machine) holds that thread off for the whole spin.
constexpr int64_t kSpinMicros = 50;

template <typename Done>
void ThreadPool::SpinUntil(const Done& done) {
  const auto start = std::chrono::steady_clock::now();
  do {
    for (int i = 0; i < 256; ++i) {
      if (done()) return;
    }
  } while (std::chrono::steady_clock::now() - start <= std::chrono::microseconds(kSpinMicros));
}

void ThreadPool::WorkerLoop(int worker) {
  uint64_t seen_generation = 0;
  for (;;) {
    SpinUntil([&] { return generation_.load(std::memory_order_acquire) != seen_generation; });
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen_generation; });
      if (stopping_) return;
      seen_generation = generation_;
      ++busy_workers_;
    }
    RunTasks();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --busy_workers_;
    }
    done_.notify_all();
  }
}

void ThreadPool::ParallelFor(int64_t n_tasks, const std::function<void(int64_t)>& fn) {
  if (n_threads_ == 1 || n_tasks <= 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    n_tasks_ = n_tasks;
    next_task_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  RunTasks();
  // RunTasks returned: no task is left to start, only the workers' last ones to finish.
  SpinUntil([&] { return busy_workers_.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return next_task_ >= n_tasks_ && busy_workers_ == 0; });
  job_ = nullptr;
  if (error_) {
    std::exception_ptr error = std::move(error_);
    error_ = nullptr;
    std::rethrow_exception(error);
  }
}

}  // namespace gpt2
