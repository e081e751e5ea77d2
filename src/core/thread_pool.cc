#include "core/thread_pool.h"

#include <algorithm>

#include "core/env.h"

namespace inflight {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = env().num_threads;
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  num_threads = std::max(1, num_threads);
  for (int i = 0; i + 1 < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool;
  return pool;
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t min_chunk) {
  if (n <= 0) return;
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  const int64_t wanted = std::min<int64_t>(max_chunks, num_threads() * 4);
  // Chunks of ceil(n / wanted) items; as many as that takes to cover n (no empty chunk).
  const int64_t chunk = (n + wanted - 1) / wanted;
  const int64_t num_chunks = (n + chunk - 1) / chunk;
  if (num_chunks <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    num_chunks_ = num_chunks;
    chunk_ = chunk;
    next_chunk_ = 0;
    pending_ = num_chunks;
    ++generation_;
  }
  start_cv_.notify_all();
  // The caller works too.
  std::unique_lock<std::mutex> lock(mutex_);
  while (next_chunk_ < num_chunks_) {
    const int64_t c = next_chunk_++;
    lock.unlock();
    fn(c * chunk_, std::min(n, (c + 1) * chunk_));
    lock.lock();
    --pending_;
  }
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  fn_ = nullptr;
}

void ThreadPool::worker_loop(int /*index*/) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    while (fn_ != nullptr && next_chunk_ < num_chunks_) {
      const int64_t c = next_chunk_++;
      const auto* fn = fn_;
      const int64_t n = n_, chunk = chunk_;
      lock.unlock();
      (*fn)(c * chunk, std::min(n, (c + 1) * chunk));
      lock.lock();
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }
}

}  // namespace inflight
