#include "engine/kv_block_manager.h"

#include <algorithm>

#include "core/check.h"

namespace inflight {

KvBlockManager::KvBlockManager(int64_t num_blocks, int32_t block_size, bool enable_prefix_caching)
    : block_size_(block_size),
      num_blocks_(num_blocks),
      prefix_caching_(enable_prefix_caching),
      pool_(num_blocks),
      cache_(pool_, block_size) {}

std::vector<int32_t> KvBlockManager::find_cached_prefix(Sequence& seq) {
  if (!prefix_caching_ || seq.num_tokens() <= 1) return {};
  cache_.extend_hashes(seq.token_ids, seq.block_hashes);
  const auto max_blocks = static_cast<size_t>((seq.num_tokens() - 1) / block_size_);
  return cache_.match(seq.block_hashes, seq.token_ids, max_blocks);
}

bool KvBlockManager::allocate(Sequence& seq, int32_t num_tokens, std::span<const int32_t> cached) {
  INFLIGHT_CHECK(cached.empty() || seq.block_table.empty(),
                 "a prefix hit for sequence {} that already holds {} blocks", seq.id,
                 seq.block_table.size());
  const int64_t have = static_cast<int64_t>(seq.block_table.size() + cached.size());
  const int64_t num_new = std::max<int64_t>(0, blocks_for(num_tokens) - have);
  // Cached blocks that are free leave the free list when acquired: they count against it too.
  const auto num_revived =
      std::count_if(cached.begin(), cached.end(), [&](int32_t b) { return pool_.is_free(b); });
  if (num_new + num_revived > pool_.num_free()) return false;
  for (int32_t b : cached) {
    pool_.acquire(b);
    seq.block_table.push_back(b);
  }
  if (!cached.empty()) seq.num_published_blocks = static_cast<int32_t>(cached.size());
  for (int32_t b : cache_.allocate(num_new)) seq.block_table.push_back(b);
  return true;
}

void KvBlockManager::cache_full_blocks(Sequence& seq) {
  if (!prefix_caching_) return;
  const int32_t num_full = seq.num_computed_tokens / block_size_;
  if (num_full <= seq.num_published_blocks) return;
  INFLIGHT_CHECK(static_cast<size_t>(num_full) <= seq.block_table.size(),
                 "sequence {} computed {} tokens beyond its {} blocks", seq.id,
                 seq.num_computed_tokens, seq.block_table.size());
  cache_.extend_hashes(seq.token_ids, seq.block_hashes);
  for (int32_t i = seq.num_published_blocks; i < num_full; ++i) {
    cache_.insert(seq.block_table[static_cast<size_t>(i)], static_cast<size_t>(i), seq.block_hashes,
                  seq.token_ids);
  }
  seq.num_published_blocks = num_full;
}

void KvBlockManager::free(Sequence& seq) {
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    pool_.release(*it);
  }
  seq.block_table.clear();
  seq.num_published_blocks = 0;
}

void KvBlockManager::share(const Sequence& parent, Sequence& child, int32_t num_blocks) {
  INFLIGHT_CHECK(child.block_table.empty(), "fork into sequence {} that holds blocks", child.id);
  INFLIGHT_CHECK(num_blocks >= 0 && static_cast<size_t>(num_blocks) <= parent.block_table.size(),
                 "sharing {} of the {} blocks of sequence {}", num_blocks,
                 parent.block_table.size(), parent.id);
  for (int32_t i = 0; i < num_blocks; ++i) {
    const int32_t b = parent.block_table[static_cast<size_t>(i)];
    pool_.acquire(b);
    child.block_table.push_back(b);
  }
  child.num_published_blocks = std::min(parent.num_published_blocks, num_blocks);
  const size_t num_hashes = std::min(parent.block_hashes.size(), static_cast<size_t>(num_blocks));
  child.block_hashes.assign(parent.block_hashes.begin(),
                            parent.block_hashes.begin() + static_cast<std::ptrdiff_t>(num_hashes));
}

void KvBlockManager::check_integrity() const {
  pool_.check_integrity();
  cache_.check_integrity();
  INFLIGHT_CHECK(prefix_caching_ || cache_.size() == 0, "prefix cache holds {} entries while off",
                 cache_.size());
}

}  // namespace inflight
