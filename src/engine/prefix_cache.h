// PrefixCache: finds KV blocks already computed for the same token prefix.
//
// Only full blocks are cached. A block's key chains the whole prefix before it:
//   hash[0] = chain_hash(kRootHash, tokens[0 .. B))
//   hash[i] = chain_hash(hash[i-1], tokens[i*B .. (i+1)*B))          B = block_size
// so equal keys mean equal prefixes, and a lookup walks the chain from the first block until
// the first miss. Each entry also keeps its parent key and tokens, and a hit must match both,
// so a 64-bit collision cannot hand out the wrong KV.
//
// The blocks themselves live in the BlockPool (which knows which ids carry a hash); this class
// owns the key -> block map and keeps it equal to the pool's view: allocation goes through
// allocate() so evicted blocks leave the map in the same call.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/block_pool.h"

namespace inflight {

class PrefixCache {
 public:
  static constexpr uint64_t kRootHash = 0x6a09e667f3bcc908ULL;

  PrefixCache(BlockPool& pool, int32_t block_size);

  static uint64_t chain_hash(uint64_t parent, std::span<const int32_t> block_tokens);

  // Appends to *hashes the keys of the full blocks of `tokens` that it does not hold yet.
  void extend_hashes(std::span<const int32_t> tokens, std::vector<uint64_t>& hashes) const;

  // The longest chain of cached blocks for the leading `max_blocks` keys of `hashes` (the keys
  // of `tokens`). The blocks are not acquired.
  std::vector<int32_t> match(std::span<const uint64_t> hashes, std::span<const int32_t> tokens,
                             size_t max_blocks) const;

  // Publishes in-use `block` as holding full block `index` of `tokens` (key hashes[index]).
  // Returns false, changing nothing, when that key is already cached in another block.
  bool insert(int32_t block, size_t index, std::span<const uint64_t> hashes,
              std::span<const int32_t> tokens);

  // BlockPool::allocate, dropping evicted blocks from the map.
  std::vector<int32_t> allocate(int64_t n);

  size_t size() const { return entries_.size(); }
  uint64_t num_evictions() const { return num_evictions_; }

  // Throws Error(kInternal) unless the map and the pool's hashes describe the same blocks.
  void check_integrity() const;

 private:
  struct Entry {
    int32_t block;
    uint64_t parent;
    std::vector<int32_t> tokens;  // [block_size]
  };

  BlockPool& pool_;
  int32_t block_size_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::vector<uint64_t> evicted_;  // scratch
  uint64_t num_evictions_ = 0;
};

}  // namespace inflight
