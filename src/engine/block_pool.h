// BlockPool: the KV blocks of the paged cache as reference-counted ids with an O(1) free list.
//
// A block is in one of three states:
//   free, uncached   ref_count 0, no hash    in the free list, near the head (reused first)
//   free, cached     ref_count 0, hash set   in the free list, LRU order towards the tail;
//                                            its KV is still valid and a prefix hit revives it
//   in use           ref_count >= 1          not in the free list; may carry a hash (a full
//                                            block shared through the prefix cache)
//
// The free list is an intrusive doubly-linked list over block ids, always ordered
// [uncached ... | cached, least recently freed first ...]. allocate() pops from the head, so
// cached blocks are evicted only when no uncached block is left, oldest first.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace inflight {

class BlockPool {
 public:
  explicit BlockPool(int64_t num_blocks);

  int64_t num_blocks() const { return static_cast<int64_t>(ref_count_.size()); }
  // Free blocks, cached ones included (they are evictable).
  int64_t num_free() const { return num_free_; }
  int64_t num_free_cached() const { return num_free_cached_; }

  // Takes `n` blocks from the head of the free list: free -> in use (ref_count = 1).
  // A cached block taken is evicted: its hash is cleared and appended to *evicted.
  // NOTE: n must be <= num_free() (checked); callers test first so a failed step changes nothing.
  std::vector<int32_t> allocate(int64_t n, std::vector<uint64_t>* evicted);

  // ref_count += 1. A free (cached) block leaves the free list: free -> in use.
  void acquire(int32_t block);
  // ref_count -= 1. At 0: in use -> free, at the LRU tail when cached, else at the head.
  void release(int32_t block);

  int32_t ref_count(int32_t block) const { return ref_count_[checked(block)]; }
  bool is_free(int32_t block) const { return ref_count(block) == 0; }

  // Marks an in-use block as holding the full block with this prefix-cache hash.
  void set_hash(int32_t block, uint64_t hash);
  std::optional<uint64_t> hash(int32_t block) const;

  // Throws Error(kInternal) on any broken invariant of the list, the counts and the states.
  void check_integrity() const;

 private:
  static constexpr int32_t kNil = -1;

  size_t checked(int32_t block) const;
  void unlink(int32_t block);
  void push_front(int32_t block);
  void push_back(int32_t block);

  std::vector<int32_t> ref_count_;
  std::vector<uint64_t> hash_;
  std::vector<uint8_t> has_hash_;
  std::vector<int32_t> prev_;  // free-list links; kNil at the ends and for blocks in use
  std::vector<int32_t> next_;
  int32_t head_ = kNil;
  int32_t tail_ = kNil;
  int64_t num_free_ = 0;
  int64_t num_free_cached_ = 0;
};

}  // namespace inflight
