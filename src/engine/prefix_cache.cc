#include "engine/prefix_cache.h"

#include <algorithm>

#include "core/check.h"
#include "core/hash.h"

namespace inflight {

PrefixCache::PrefixCache(BlockPool& pool, int32_t block_size)
    : pool_(pool), block_size_(block_size) {
  INFLIGHT_CHECK_CODE(block_size > 0, ErrorCode::kInvalidArgument,
                      "block_size must be >= 1, got {}", block_size);
}

uint64_t PrefixCache::chain_hash(uint64_t parent, std::span<const int32_t> block_tokens) {
  uint64_t h = splitmix64(parent ^ (0x51ed27ULL + block_tokens.size()));
  for (int32_t t : block_tokens) h = splitmix64(h ^ static_cast<uint32_t>(t));
  return h;
}

void PrefixCache::extend_hashes(std::span<const int32_t> tokens,
                                std::vector<uint64_t>& hashes) const {
  const size_t bs = static_cast<size_t>(block_size_);
  const size_t num_full = tokens.size() / bs;
  while (hashes.size() < num_full) {
    const size_t i = hashes.size();
    const uint64_t parent = i == 0 ? kRootHash : hashes[i - 1];
    hashes.push_back(chain_hash(parent, tokens.subspan(i * bs, bs)));
  }
}

std::vector<int32_t> PrefixCache::match(std::span<const uint64_t> hashes,
                                        std::span<const int32_t> tokens, size_t max_blocks) const {
  const size_t bs = static_cast<size_t>(block_size_);
  const size_t limit = std::min({max_blocks, hashes.size(), tokens.size() / bs});
  std::vector<int32_t> blocks;
  for (size_t i = 0; i < limit; ++i) {
    const auto it = entries_.find(hashes[i]);
    if (it == entries_.end()) break;
    const Entry& e = it->second;
    const uint64_t parent = i == 0 ? kRootHash : hashes[i - 1];
    const auto want = tokens.subspan(i * bs, bs);
    if (e.parent != parent || !std::equal(want.begin(), want.end(), e.tokens.begin())) break;
    blocks.push_back(e.block);
  }
  return blocks;
}

bool PrefixCache::insert(int32_t block, size_t index, std::span<const uint64_t> hashes,
                         std::span<const int32_t> tokens) {
  const size_t bs = static_cast<size_t>(block_size_);
  INFLIGHT_CHECK(index < hashes.size() && (index + 1) * bs <= tokens.size(),
                 "insert of block {} for a prefix of {} tokens", index, tokens.size());
  const uint64_t h = hashes[index];
  if (const auto cur = pool_.hash(block); cur.has_value()) {
    INFLIGHT_CHECK(*cur == h, "block {} is cached under another key", block);
    return false;  // already published (a block shared after fork or a prefix hit)
  }
  const auto [it, inserted] = entries_.try_emplace(h);
  if (!inserted) return false;  // the same prefix was computed twice; the first copy wins
  const auto span = tokens.subspan(index * bs, bs);
  it->second = Entry{block, index == 0 ? kRootHash : hashes[index - 1],
                     std::vector<int32_t>(span.begin(), span.end())};
  pool_.set_hash(block, h);
  return true;
}

std::vector<int32_t> PrefixCache::allocate(int64_t n) {
  evicted_.clear();
  std::vector<int32_t> blocks = pool_.allocate(n, &evicted_);
  for (uint64_t h : evicted_) {
    const size_t erased = entries_.erase(h);
    INFLIGHT_CHECK(erased == 1, "evicted key {:016x} was not in the prefix cache", h);
  }
  num_evictions_ += evicted_.size();
  return blocks;
}

void PrefixCache::check_integrity() const {
  size_t num_hashed = 0;
  for (int32_t b = 0; b < pool_.num_blocks(); ++b) {
    const auto h = pool_.hash(b);
    if (!h) continue;
    ++num_hashed;
    const auto it = entries_.find(*h);
    INFLIGHT_CHECK(it != entries_.end(), "block {} carries key {:016x} missing from the cache", b,
                   *h);
    INFLIGHT_CHECK(it->second.block == b, "key {:016x} maps to block {} but block {} carries it",
                   *h, it->second.block, b);
  }
  INFLIGHT_CHECK(num_hashed == entries_.size(), "{} cache entries but {} blocks carry a key",
                 entries_.size(), num_hashed);
  for (const auto& [h, e] : entries_) {
    INFLIGHT_CHECK(e.tokens.size() == static_cast<size_t>(block_size_),
                   "entry {:016x} holds {} tokens", h, e.tokens.size());
    INFLIGHT_CHECK(chain_hash(e.parent, e.tokens) == h, "entry {:016x} does not hash to its key",
                   h);
  }
}

}  // namespace inflight
