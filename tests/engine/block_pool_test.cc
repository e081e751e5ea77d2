#include "engine/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "core/check.h"

namespace inflight {
namespace {

TEST(BlockPool, StartsAllFreeAndAllocatesDistinctBlocks) {
  for (int64_t n : {1, 3, 7, 91}) {
    BlockPool pool(n);
    pool.check_integrity();
    EXPECT_EQ(pool.num_free(), n);
    const auto blocks = pool.allocate(n, nullptr);
    ASSERT_EQ(static_cast<int64_t>(blocks.size()), n);
    EXPECT_EQ(std::set<int32_t>(blocks.begin(), blocks.end()).size(), static_cast<size_t>(n));
    for (int32_t b : blocks) EXPECT_EQ(pool.ref_count(b), 1);
    EXPECT_EQ(pool.num_free(), 0);
    pool.check_integrity();
    for (int32_t b : blocks) pool.release(b);
    EXPECT_EQ(pool.num_free(), n);
    pool.check_integrity();
  }
}

TEST(BlockPool, RejectsBadSizesAndMisuse) {
  EXPECT_THROW(BlockPool(0), Error);
  EXPECT_THROW(BlockPool(-3), Error);
  BlockPool pool(3);
  EXPECT_THROW(pool.allocate(4, nullptr), Error);
  EXPECT_EQ(pool.num_free(), 3);  // a failed allocate changes nothing
  EXPECT_THROW(pool.release(0), Error);
  EXPECT_THROW(pool.acquire(0), Error);  // free and uncached: nothing to revive
  EXPECT_THROW(pool.ref_count(3), Error);
  EXPECT_THROW(pool.set_hash(1, 42), Error);  // only in-use blocks get a hash
  pool.check_integrity();
}

TEST(BlockPool, RefCountsShareBlocks) {
  BlockPool pool(2);
  const int32_t b = pool.allocate(1, nullptr)[0];
  pool.acquire(b);
  pool.acquire(b);
  EXPECT_EQ(pool.ref_count(b), 3);
  pool.release(b);
  pool.release(b);
  EXPECT_FALSE(pool.is_free(b));
  EXPECT_EQ(pool.num_free(), 1);
  pool.release(b);
  EXPECT_TRUE(pool.is_free(b));
  EXPECT_EQ(pool.num_free(), 2);
  pool.check_integrity();
}

TEST(BlockPool, UncachedBlocksAreReusedBeforeCachedOnesWhichEvictInLruOrder) {
  BlockPool pool(5);
  const auto blocks = pool.allocate(5, nullptr);
  // blocks[0..2] become cached with hashes 100, 101, 102; 3 and 4 stay uncached.
  for (int i = 0; i < 3; ++i) pool.set_hash(blocks[i], 100 + i);
  pool.release(blocks[1]);  // cached, freed first: least recently used
  pool.release(blocks[3]);  // uncached
  pool.release(blocks[0]);  // cached
  pool.release(blocks[4]);  // uncached
  pool.release(blocks[2]);  // cached, freed last
  pool.check_integrity();
  EXPECT_EQ(pool.num_free_cached(), 3);

  std::vector<uint64_t> evicted;
  auto got = pool.allocate(2, &evicted);
  EXPECT_TRUE(evicted.empty()) << "uncached blocks must go first";
  EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()), (std::set<int32_t>{blocks[3], blocks[4]}));

  got = pool.allocate(2, &evicted);
  EXPECT_EQ(got, (std::vector<int32_t>{blocks[1], blocks[0]}));
  EXPECT_EQ(evicted, (std::vector<uint64_t>{101, 100}));
  EXPECT_FALSE(pool.hash(blocks[1]).has_value()) << "an evicted block forgets its hash";
  EXPECT_EQ(pool.hash(blocks[2]), 102u);
  pool.check_integrity();
}

TEST(BlockPool, AcquireRevivesAFreeCachedBlockFromTheMiddleOfTheList) {
  BlockPool pool(4);
  const auto blocks = pool.allocate(4, nullptr);
  for (int i = 0; i < 4; ++i) pool.set_hash(blocks[i], 7 + i);
  for (int32_t b : blocks) pool.release(b);
  EXPECT_EQ(pool.num_free(), 4);
  pool.acquire(blocks[2]);  // a prefix hit: free (cached) -> in use
  EXPECT_EQ(pool.ref_count(blocks[2]), 1);
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_EQ(pool.num_free_cached(), 3);
  pool.check_integrity();
  std::vector<uint64_t> evicted;
  const auto got = pool.allocate(3, &evicted);
  EXPECT_EQ(got, (std::vector<int32_t>{blocks[0], blocks[1], blocks[3]}));
  EXPECT_EQ(evicted, (std::vector<uint64_t>{7, 8, 10}));
  EXPECT_EQ(pool.hash(blocks[2]), 9u) << "the revived block keeps its hash";
  pool.check_integrity();
}

TEST(BlockPool, RandomOperationsKeepEveryInvariant) {
  std::mt19937 rng(1234);
  for (int64_t n : {1, 3, 16, 91}) {
    BlockPool pool(n);
    std::vector<int32_t> held;  // one entry per reference
    uint64_t next_hash = 1;
    for (int op = 0; op < 3000; ++op) {
      const int kind = static_cast<int>(rng() % 4);
      if (kind == 0 && pool.num_free() > 0) {
        const int64_t k = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(pool.num_free()));
        for (int32_t b : pool.allocate(k, nullptr)) held.push_back(b);
      } else if (kind == 1 && !held.empty()) {
        const size_t i = rng() % held.size();
        pool.release(held[i]);
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (kind == 2 && !held.empty()) {
        const int32_t b = held[rng() % held.size()];
        if (!pool.hash(b)) pool.set_hash(b, next_hash++);
        pool.acquire(b);
        held.push_back(b);
      } else if (kind == 3) {
        const int32_t b = static_cast<int32_t>(rng() % static_cast<uint64_t>(n));
        if (pool.is_free(b) && pool.hash(b)) {
          pool.acquire(b);
          held.push_back(b);
        }
      }
      pool.check_integrity();
      ASSERT_EQ(pool.num_free() +
                    static_cast<int64_t>(std::set<int32_t>(held.begin(), held.end()).size()),
                n);
    }
    for (int32_t b : held) pool.release(b);
    pool.check_integrity();
    EXPECT_EQ(pool.num_free(), n);
  }
}

}  // namespace
}  // namespace inflight
