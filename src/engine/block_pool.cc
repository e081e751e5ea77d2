#include "engine/block_pool.h"

#include <limits>

#include "core/check.h"

namespace inflight {

BlockPool::BlockPool(int64_t num_blocks) {
  INFLIGHT_CHECK_CODE(num_blocks > 0 && num_blocks < std::numeric_limits<int32_t>::max(),
                      ErrorCode::kInvalidArgument,
                      "the KV cache needs between 1 and 2^31-2 blocks, got {}", num_blocks);
  const auto n = static_cast<size_t>(num_blocks);
  ref_count_.assign(n, 0);
  hash_.assign(n, 0);
  has_hash_.assign(n, 0);
  prev_.assign(n, kNil);
  next_.assign(n, kNil);
  for (int32_t b = 0; b < static_cast<int32_t>(n); ++b) push_back(b);
}

size_t BlockPool::checked(int32_t block) const {
  INFLIGHT_CHECK(block >= 0 && block < num_blocks(), "block id {} out of range [0, {})", block,
                 num_blocks());
  return static_cast<size_t>(block);
}

void BlockPool::unlink(int32_t block) {
  const auto b = static_cast<size_t>(block);
  if (prev_[b] != kNil)
    next_[static_cast<size_t>(prev_[b])] = next_[b];
  else
    head_ = next_[b];
  if (next_[b] != kNil)
    prev_[static_cast<size_t>(next_[b])] = prev_[b];
  else
    tail_ = prev_[b];
  prev_[b] = next_[b] = kNil;
  --num_free_;
  if (has_hash_[b]) --num_free_cached_;
}

void BlockPool::push_front(int32_t block) {
  const auto b = static_cast<size_t>(block);
  prev_[b] = kNil;
  next_[b] = head_;
  if (head_ != kNil)
    prev_[static_cast<size_t>(head_)] = block;
  else
    tail_ = block;
  head_ = block;
  ++num_free_;
}

void BlockPool::push_back(int32_t block) {
  const auto b = static_cast<size_t>(block);
  next_[b] = kNil;
  prev_[b] = tail_;
  if (tail_ != kNil)
    next_[static_cast<size_t>(tail_)] = block;
  else
    head_ = block;
  tail_ = block;
  ++num_free_;
  if (has_hash_[b]) ++num_free_cached_;
}

std::vector<int32_t> BlockPool::allocate(int64_t n, std::vector<uint64_t>* evicted) {
  INFLIGHT_CHECK(n >= 0 && n <= num_free_, "allocate({}) with only {} free blocks", n, num_free_);
  std::vector<int32_t> blocks;
  blocks.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t block = head_;
    const auto b = static_cast<size_t>(block);
    unlink(block);
    if (has_hash_[b]) {  // evict: the KV stays in memory but no lookup can reach it any more
      if (evicted != nullptr) evicted->push_back(hash_[b]);
      has_hash_[b] = 0;
      hash_[b] = 0;
    }
    ref_count_[b] = 1;  // free -> in use
    blocks.push_back(block);
  }
  return blocks;
}

void BlockPool::acquire(int32_t block) {
  const size_t b = checked(block);
  if (ref_count_[b] == 0) {
    INFLIGHT_CHECK(has_hash_[b], "acquire of free block {} that holds no cached KV", block);
    unlink(block);  // free (cached) -> in use
  }
  ++ref_count_[b];
}

void BlockPool::release(int32_t block) {
  const size_t b = checked(block);
  INFLIGHT_CHECK(ref_count_[b] > 0, "release of free block {}", block);
  if (--ref_count_[b] > 0) return;
  // in use -> free
  if (has_hash_[b])
    push_back(block);
  else
    push_front(block);
}

void BlockPool::set_hash(int32_t block, uint64_t hash) {
  const size_t b = checked(block);
  INFLIGHT_CHECK(ref_count_[b] > 0, "set_hash on free block {}", block);
  INFLIGHT_CHECK(!has_hash_[b] || hash_[b] == hash, "block {} already cached under another hash",
                 block);
  hash_[b] = hash;
  has_hash_[b] = 1;
}

std::optional<uint64_t> BlockPool::hash(int32_t block) const {
  const size_t b = checked(block);
  if (!has_hash_[b]) return std::nullopt;
  return hash_[b];
}

void BlockPool::check_integrity() const {
  int64_t num_listed = 0;
  int64_t num_cached = 0;
  bool seen_cached = false;
  int32_t prev = kNil;
  for (int32_t b = head_; b != kNil; b = next_[static_cast<size_t>(b)]) {
    INFLIGHT_CHECK(b >= 0 && b < num_blocks(), "free list holds bad id {}", b);
    INFLIGHT_CHECK(++num_listed <= num_blocks(), "free list has a cycle");
    const auto i = static_cast<size_t>(b);
    INFLIGHT_CHECK(prev_[i] == prev, "free list back link of block {} is {}, want {}", b, prev_[i],
                   prev);
    INFLIGHT_CHECK(ref_count_[i] == 0, "block {} in the free list has ref_count {}", b,
                   ref_count_[i]);
    if (has_hash_[i]) {
      seen_cached = true;
      ++num_cached;
    } else {
      INFLIGHT_CHECK(!seen_cached, "uncached free block {} behind a cached one", b);
    }
    prev = b;
  }
  INFLIGHT_CHECK(prev == tail_, "free list tail {} but the walk ends at {}", tail_, prev);
  INFLIGHT_CHECK(num_listed == num_free_, "free list holds {} blocks, counter says {}", num_listed,
                 num_free_);
  INFLIGHT_CHECK(num_cached == num_free_cached_, "{} free cached blocks, counter says {}",
                 num_cached, num_free_cached_);
  int64_t num_zero = 0;
  for (size_t i = 0; i < ref_count_.size(); ++i) {
    INFLIGHT_CHECK(ref_count_[i] >= 0, "block {} has ref_count {}", i, ref_count_[i]);
    if (ref_count_[i] == 0)
      ++num_zero;
    else
      INFLIGHT_CHECK(prev_[i] == kNil && next_[i] == kNil, "in-use block {} is linked", i);
  }
  INFLIGHT_CHECK(num_zero == num_free_, "{} blocks with ref_count 0 but {} free", num_zero,
                 num_free_);
}

}  // namespace inflight
