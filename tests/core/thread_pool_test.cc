#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace inflight {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {1, 2, 3, 7, 91, 769, 10007}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

// Every chunk handed out is a non-empty range inside [0, n): callers may copy `end - begin`
// items without checking (n = 9 over 8 chunks once gave a chunk starting past n).
TEST(ThreadPool, ChunksAreNonEmptyRangesInsideN) {
  ThreadPool pool(4);
  for (int64_t n = 1; n <= 200; ++n) {
    std::atomic<int> bad{0};
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      if (!(0 <= b && b < e && e <= n)) bad++;
    });
    ASSERT_EQ(bad.load(), 0) << "n = " << n;
  }
}

TEST(ThreadPool, ConcurrentCallersAreSerialisedSafely) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r) {
        pool.parallel_for(100, [&](int64_t b, int64_t e) { total += e - b; });
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 100);
}

}  // namespace
}  // namespace inflight
