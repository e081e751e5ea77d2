#include "tokenizer/token_index.h"

#include "core/check.h"

namespace inflight {

uint64_t TokenIndex::hash_of(std::string_view key) {
  // FNV-1a, then a final mix: keys are short (a few bytes), so this beats heavier hashes.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : key) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  h ^= h >> 32;
  return h;
}

void TokenIndex::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{0, 0, -1, 0});
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.id < 0) continue;
    size_t i = s.hash & mask;
    while (slots_[i].id >= 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

bool TokenIndex::insert(std::string_view key, int32_t id) {
  INFLIGHT_CHECK(id >= 0, "token id {} is negative", id);
  if ((num_keys_ + 1) * 2 > slots_.size()) grow();
  const uint64_t h = hash_of(key);
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  for (; slots_[i].id >= 0; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.hash == static_cast<uint32_t>(h) && s.length == key.size() &&
        std::string_view(arena_.data() + s.offset, s.length) == key) {
      return false;
    }
  }
  INFLIGHT_CHECK_CODE(arena_.size() + key.size() < UINT32_MAX, ErrorCode::kInvalidFile,
                      "vocabulary text exceeds 4 GiB");
  slots_[i] = Slot{static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), id,
                   static_cast<uint32_t>(h)};
  arena_.append(key);
  ++num_keys_;
  return true;
}

int32_t TokenIndex::find(std::string_view key) const {
  if (slots_.empty()) return -1;
  const uint64_t h = hash_of(key);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id < 0) return -1;
    if (s.hash == static_cast<uint32_t>(h) && s.length == key.size() &&
        std::string_view(arena_.data() + s.offset, s.length) == key) {
      return s.id;
    }
  }
}

void PairMap::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    size_t i = mix(s.key) & mask;
    while (slots_[i].key != kEmpty) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void PairMap::insert(int32_t left, int32_t right, Value value) {
  if ((num_ + 1) * 2 > slots_.size()) grow();
  const uint64_t k = pack(left, right);
  const size_t mask = slots_.size() - 1;
  size_t i = mix(k) & mask;
  for (; slots_[i].key != kEmpty; i = (i + 1) & mask) {
    if (slots_[i].key == k) return;
  }
  slots_[i] = Slot{k, value};
  ++num_;
}

}  // namespace inflight
