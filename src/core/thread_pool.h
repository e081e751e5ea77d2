// A fixed pool of worker threads for data-parallel loops (the CPU backend's kernels).
//
//   pool.parallel_for(n, [&](int64_t begin, int64_t end) { ... });
//
// splits [0, n) into contiguous chunks, runs them on the workers and the calling thread, and
// returns when all are done. Calls from several threads at once are serialised.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace inflight {

class ThreadPool {
 public:
  // num_threads <= 0: INFLIGHT_NUM_THREADS, else the hardware concurrency.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // fn(begin, end) over chunks of at least `min_chunk` items.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                    int64_t min_chunk = 1);

  // The process-wide pool.
  static ThreadPool& global();

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one parallel_for at a time
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
  int64_t num_chunks_ = 0;
  int64_t next_chunk_ = 0;   // guarded by mutex_
  int64_t pending_ = 0;      // chunks not yet finished
  uint64_t generation_ = 0;  // bumped per parallel_for
  bool stop_ = false;
};

}  // namespace inflight
