// KvBlockManager: the block tables of sequences, over a BlockPool and its PrefixCache.
//
// Each running sequence's block_table covers at least its computed tokens: token t lives in
// block_table[t / block_size] at offset t % block_size. A block appears in the tables of
// ref_count sequences (shared prompt blocks after a fork or a prefix hit).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/block_pool.h"
#include "engine/prefix_cache.h"
#include "engine/sequence.h"

namespace inflight {

class KvBlockManager {
 public:
  KvBlockManager(int64_t num_blocks, int32_t block_size, bool enable_prefix_caching);

  int32_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return num_blocks_; }  // fixed: any thread may read it
  int64_t num_free_blocks() const { return pool_.num_free(); }
  bool prefix_caching() const { return prefix_caching_; }
  int64_t blocks_for(int64_t num_tokens) const {
    return (num_tokens + block_size_ - 1) / block_size_;
  }

  // The cached blocks of the longest prefix of seq's tokens, whole blocks only and leaving at
  // least one token to compute (its logits are needed). Not acquired. Empty when disabled.
  std::vector<int32_t> find_cached_prefix(Sequence& seq);

  // Grows seq's block table to cover `num_tokens` tokens, first appending `cached` (a prefix
  // hit: the table must be empty then; those blocks are acquired). All or nothing: returns
  // false and changes nothing when too few blocks are free.
  bool allocate(Sequence& seq, int32_t num_tokens, std::span<const int32_t> cached = {});

  // Publishes seq's full, computed blocks in the prefix cache (after a step computed them).
  void cache_full_blocks(Sequence& seq);

  // in use -> released (ref_count -= 1) for each block, the last first so that a sequence's
  // deepest cached blocks are evicted before its prefix; the table is cleared.
  void free(Sequence& seq);

  // child.block_table := the first `num_blocks` blocks of parent's (ref_count += 1 each).
  // The child's table must be empty.
  void share(const Sequence& parent, Sequence& child, int32_t num_blocks);

  const BlockPool& pool() const { return pool_; }
  const PrefixCache& cache() const { return cache_; }

  void check_integrity() const;

 private:
  const int32_t block_size_;
  const int64_t num_blocks_;
  const bool prefix_caching_;
  BlockPool pool_;
  PrefixCache cache_;
};

}  // namespace inflight
