#include "engine/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>

#include "engine/kv_block_manager.h"

namespace inflight {
namespace {

std::vector<int32_t> iota_tokens(int32_t n, int32_t start = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

TEST(PrefixCache, ChainHashDependsOnTheWholePrefix) {
  const std::vector<int32_t> a = {1, 2, 3, 4};
  const std::vector<int32_t> b = {1, 2, 3, 5};
  EXPECT_NE(PrefixCache::chain_hash(PrefixCache::kRootHash, a),
            PrefixCache::chain_hash(PrefixCache::kRootHash, b));
  EXPECT_NE(PrefixCache::chain_hash(1, a), PrefixCache::chain_hash(2, a));
  EXPECT_EQ(PrefixCache::chain_hash(9, a), PrefixCache::chain_hash(9, a));
  // Same tokens split differently into blocks must not collide.
  const std::vector<int32_t> ab = {1, 2};
  EXPECT_NE(PrefixCache::chain_hash(PrefixCache::kRootHash, ab),
            PrefixCache::chain_hash(PrefixCache::kRootHash, std::vector<int32_t>{1, 2, 0}));
}

TEST(PrefixCache, ExtendHashesCoversFullBlocksOnly) {
  BlockPool pool(4);
  PrefixCache cache(pool, 3);
  std::vector<uint64_t> hashes;
  cache.extend_hashes(iota_tokens(2), hashes);
  EXPECT_TRUE(hashes.empty());
  cache.extend_hashes(iota_tokens(7), hashes);
  ASSERT_EQ(hashes.size(), 2u);
  std::vector<uint64_t> again;
  cache.extend_hashes(iota_tokens(8), again);
  EXPECT_EQ(again, hashes) << "hashes are a function of the prefix only";
}

TEST(PrefixCache, MatchFindsTheLongestVerifiedChain) {
  BlockPool pool(8);
  PrefixCache cache(pool, 4);
  const auto tokens = iota_tokens(14);  // 3 full blocks + 2
  std::vector<uint64_t> hashes;
  cache.extend_hashes(tokens, hashes);
  const auto blocks = cache.allocate(4);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(cache.insert(blocks[i], i, hashes, tokens));
  cache.check_integrity();
  EXPECT_EQ(cache.match(hashes, tokens, 10),
            (std::vector<int32_t>{blocks[0], blocks[1], blocks[2]}));
  EXPECT_EQ(cache.match(hashes, tokens, 2).size(), 2u);

  // Diverging in the second block: only the first block matches.
  auto other = tokens;
  other[5] = 999;
  std::vector<uint64_t> other_hashes;
  cache.extend_hashes(other, other_hashes);
  EXPECT_EQ(cache.match(other_hashes, other, 10), (std::vector<int32_t>{blocks[0]}));

  // Keys of one prefix with the tokens of another: the stored tokens refuse the match.
  EXPECT_EQ(cache.match(hashes, other, 10), (std::vector<int32_t>{blocks[0]}));

  // Re-inserting the same key from another block is refused and leaves that block uncached.
  EXPECT_FALSE(cache.insert(blocks[3], 0, hashes, tokens));
  EXPECT_FALSE(pool.hash(blocks[3]).has_value());
  cache.check_integrity();
}

TEST(PrefixCache, EvictionDropsEntriesOldestFirst) {
  BlockPool pool(3);
  PrefixCache cache(pool, 2);
  const auto t1 = iota_tokens(2, 10);
  const auto t2 = iota_tokens(2, 20);
  std::vector<uint64_t> h1, h2;
  cache.extend_hashes(t1, h1);
  cache.extend_hashes(t2, h2);
  const auto b = cache.allocate(2);
  cache.insert(b[0], 0, h1, t1);
  cache.insert(b[1], 0, h2, t2);
  pool.release(b[0]);  // t1 freed first: evicted first
  pool.release(b[1]);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.match(h1, t1, 1).size(), 1u) << "free cached blocks still match";
  cache.allocate(2);  // the uncached block, then t1's
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.num_evictions(), 1u);
  EXPECT_TRUE(cache.match(h1, t1, 1).empty());
  EXPECT_EQ(cache.match(h2, t2, 1), (std::vector<int32_t>{b[1]}));
  cache.check_integrity();
}

TEST(KvBlockManager, PrefixHitSharesBlocksAndLeavesOneTokenToCompute) {
  KvBlockManager kv(10, 4, /*enable_prefix_caching=*/true);
  Sequence a;
  a.id = 1;
  a.token_ids = iota_tokens(8);  // exactly 2 full blocks
  a.num_prompt_tokens = 8;
  ASSERT_TRUE(kv.allocate(a, 8));
  a.num_computed_tokens = 8;
  kv.cache_full_blocks(a);
  EXPECT_EQ(kv.cache().size(), 2u);

  Sequence b = a;  // same prompt, nothing computed yet
  b.id = 2;
  b.block_table.clear();
  b.block_hashes.clear();
  b.num_published_blocks = 0;
  b.num_computed_tokens = 0;
  const auto hit = kv.find_cached_prefix(b);
  EXPECT_EQ(hit.size(), 1u) << "the whole prompt is cached, but its last token must be computed";
  ASSERT_TRUE(kv.allocate(b, 8, hit));
  EXPECT_EQ(b.block_table[0], a.block_table[0]);
  EXPECT_NE(b.block_table[1], a.block_table[1]);
  EXPECT_EQ(kv.pool().ref_count(a.block_table[0]), 2);
  kv.check_integrity();

  kv.free(a);
  kv.free(b);
  EXPECT_EQ(kv.num_free_blocks(), 10);
  kv.check_integrity();
}

TEST(KvBlockManager, AllocateIsAllOrNothing) {
  KvBlockManager kv(3, 2, true);
  Sequence s;
  s.token_ids = iota_tokens(9);
  EXPECT_FALSE(kv.allocate(s, 9));  // needs 5 blocks
  EXPECT_TRUE(s.block_table.empty());
  EXPECT_EQ(kv.num_free_blocks(), 3);
  EXPECT_TRUE(kv.allocate(s, 6));
  EXPECT_EQ(s.block_table.size(), 3u);
  EXPECT_TRUE(kv.allocate(s, 5)) << "already covered: nothing to do";
  EXPECT_FALSE(kv.allocate(s, 7));
  EXPECT_EQ(s.block_table.size(), 3u);
  kv.free(s);
  kv.check_integrity();
}

TEST(KvBlockManager, DisabledCacheNeverMatches) {
  KvBlockManager kv(4, 2, false);
  Sequence s;
  s.token_ids = iota_tokens(6);
  ASSERT_TRUE(kv.allocate(s, 6));
  s.num_computed_tokens = 6;
  kv.cache_full_blocks(s);
  EXPECT_EQ(kv.cache().size(), 0u);
  Sequence t = s;
  t.block_table.clear();
  t.num_computed_tokens = 0;
  EXPECT_TRUE(kv.find_cached_prefix(t).empty());
  kv.free(s);
  kv.check_integrity();
}

}  // namespace
}  // namespace inflight
