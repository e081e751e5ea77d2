#include "tokenizer/bpe_model.h"

#include <atomic>
#include <unordered_map>

#include "core/check.h"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/utf8.h"

namespace inflight {

namespace {

// "<0x0A>" -> 10; -1 when `s` is not a byte-fallback token.
int parse_byte_token(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int hi = hex(s[3]), lo = hex(s[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Per-thread memo of recent words -> ids. Natural text repeats its words, so most words skip
// the merge loop. Keyed by the model's serial number (never reused, unlike its address).
struct WordCache {
  static constexpr size_t kMaxEntries = 1 << 15;
  static constexpr size_t kMaxWordBytes = 48;
  uint64_t model = 0;
  std::unordered_map<std::string, std::vector<int32_t>> words;
};

std::atomic<uint64_t> g_next_serial{1};

}  // namespace

BpeModel::BpeModel(BpeOptions options) : options_(options), serial_(g_next_serial.fetch_add(1)) {
  byte_ids_.fill(-1);
}

void BpeModel::add_token(std::string_view spelling, int32_t id) {
  INFLIGHT_CHECK(id >= 0, "token id {} is negative", id);
  if (!index_.insert(spelling, id)) return;
  if (static_cast<size_t>(id) >= spellings_.size()) spellings_.resize(id + 1);
  spellings_[id] = std::string(spelling);
  if (options_.input == BpeOptions::Input::kBytes) {
    if (spelling.size() == 1) byte_ids_[static_cast<uint8_t>(spelling[0])] = id;
  } else if (const int b = parse_byte_token(spelling); b >= 0) {
    byte_ids_[b] = id;
  }
}

std::string_view BpeModel::spelling(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= spellings_.size()) return {};
  return spellings_[id];
}

bool BpeModel::add_merge(int32_t left, int32_t right, uint32_t rank) {
  const std::string merged = std::string(spelling(left)) + std::string(spelling(right));
  const int32_t result = index_.find(merged);
  if (result < 0) return false;
  merges_.insert(left, right, {rank, result});
  return true;
}

void BpeModel::init_symbols(std::string_view word, std::vector<MergeSymbol>& syms) const {
  auto add = [&](uint32_t begin, uint32_t len, int32_t id) {
    const auto n = static_cast<int32_t>(syms.size());
    syms.push_back({begin, len, id, n - 1, -1});
    if (n > 0) syms[n - 1].next = n;
  };
  if (options_.input == BpeOptions::Input::kBytes) {
    for (uint32_t i = 0; i < word.size(); ++i) {
      add(i, 1, byte_ids_[static_cast<uint8_t>(word[i])]);
    }
    return;
  }
  // kChars. A pending unknown run [unk_begin, unk_end) is emitted as one unk when fusing.
  bool have_unk = false;
  uint32_t unk_begin = 0, unk_end = 0;
  auto flush_unk = [&] {
    if (have_unk) add(unk_begin, unk_end - unk_begin, options_.unk_id);
    have_unk = false;
  };
  uint32_t i = 0;
  while (i < word.size()) {
    const auto n = static_cast<uint32_t>(
        std::min<size_t>(utf8::sequence_length(static_cast<uint8_t>(word[i])), word.size() - i));
    const int32_t id = index_.find(word.substr(i, n));
    bool bytes_ok = id < 0 && options_.byte_fallback;
    for (uint32_t k = 0; bytes_ok && k < n; ++k) {
      bytes_ok = byte_ids_[static_cast<uint8_t>(word[i + k])] >= 0;
    }
    if (id >= 0) {
      flush_unk();
      add(i, n, id);
    } else if (bytes_ok) {
      flush_unk();
      for (uint32_t k = 0; k < n; ++k) add(i + k, 1, byte_ids_[static_cast<uint8_t>(word[i + k])]);
    } else if (options_.unk_id >= 0) {
      if (have_unk && options_.fuse_unk) {
        unk_end = i + n;
      } else {
        flush_unk();
        have_unk = true;
        unk_begin = i;
        unk_end = i + n;
      }
    }
    i += n;
  }
  flush_unk();
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (options_.ignore_merges) {
    const int32_t id = index_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() > WordCache::kMaxWordBytes) {
    merge_word(word, out);
    return;
  }
  thread_local WordCache cache;
  if (cache.model != serial_) {
    cache.words.clear();
    cache.model = serial_;
  }
  if (const auto it = cache.words.find(std::string(word)); it != cache.words.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  const size_t first = out.size();
  merge_word(word, out);
  if (cache.words.size() >= WordCache::kMaxEntries) cache.words.clear();
  cache.words.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<MergeSymbol> syms;
  thread_local std::vector<MergeHeapEntry> heap;
  syms.clear();
  init_symbols(word, syms);
  if (syms.empty()) return;
  if (options_.rank_by_concatenation) {
    bpe_merge(syms, heap, [&](const MergeSymbol& a, const MergeSymbol& b, MergeCandidate* c) {
      const int32_t id = index_.find(word.substr(a.begin, a.len + b.len));
      if (id < 0) return false;
      *c = {static_cast<double>(id), id};
      return true;
    });
  } else {
    bpe_merge(syms, heap, [this](const MergeSymbol& a, const MergeSymbol& b, MergeCandidate* c) {
      if (a.id < 0 || b.id < 0) return false;
      const PairMap::Value* v = merges_.find(a.id, b.id);
      if (v == nullptr) return false;
      *c = {static_cast<double>(v->rank), v->result};
      return true;
    });
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const MergeSymbol& s = syms[i];
    if (s.id >= 0) {
      out.push_back(s.id);
    } else if (options_.unk_id >= 0) {
      out.push_back(options_.unk_id);
    }
  }
}

}  // namespace inflight
