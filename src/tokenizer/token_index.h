// TokenIndex: exact string -> token id lookup over an owned arena, open addressing.
// Built once at load, then read-only (safe to share between threads).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace inflight {

class TokenIndex {
 public:
  // Adds `key` -> id. The first insertion of a key wins; returns false for a duplicate.
  bool insert(std::string_view key, int32_t id);
  // The id of `key`, or -1.
  int32_t find(std::string_view key) const;
  size_t size() const { return num_keys_; }

 private:
  struct Slot {
    uint32_t offset;  // into arena_
    uint32_t length;
    int32_t id;  // -1: empty
    uint32_t hash;
  };
  static uint64_t hash_of(std::string_view key);
  void grow();

  std::string arena_;
  std::vector<Slot> slots_;  // size is a power of two, at most half full
  size_t num_keys_ = 0;
};

// (left id, right id) -> merge result, open addressing. Read-only after construction.
class PairMap {
 public:
  struct Value {
    uint32_t rank;   // merge priority: lower first
    int32_t result;  // the merged token
  };
  // Adds a pair; the first insertion wins (later, lower-priority duplicates are ignored).
  void insert(int32_t left, int32_t right, Value value);
  // The value of (left, right), or nullptr.
  const Value* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t k = pack(left, right);
    const size_t mask = slots_.size() - 1;
    for (size_t i = mix(k) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.key == kEmpty) return nullptr;
      if (s.key == k) return &s.value;
    }
  }
  size_t size() const { return num_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    Value value{};
  };
  static uint64_t pack(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }
  static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
  }
  void grow();

  std::vector<Slot> slots_;
  size_t num_ = 0;
};

}  // namespace inflight
