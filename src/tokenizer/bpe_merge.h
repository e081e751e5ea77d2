// The BPE merge loop shared by every model: symbols form a linked list in text order; a heap
// holds the mergeable adjacent pairs keyed by (priority, left position); the best pair merges,
// and the pairs it forms with its neighbours are pushed. Stale heap entries are detected and
// skipped when popped. O(n log n) in the word length, so very long words stay cheap.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace inflight {

struct MergeSymbol {
  uint32_t begin;  // byte offset in the word
  uint32_t len;    // bytes; 0 once merged into its left neighbour
  int32_t id;      // token id, or -1 when the symbol is not a token
  int32_t prev;    // index of the neighbours in the chain, -1 at the ends
  int32_t next;
};

// What a pair may merge into: lower `key` merges first; ties go to the leftmost pair.
struct MergeCandidate {
  double key;
  int32_t id;
};

struct MergeHeapEntry {
  double key;
  int32_t left;
  int32_t right;
  uint32_t size;  // len(left) + len(right) when pushed: detects stale entries
  int32_t id;
};

// Words of at most this many symbols (nearly all of them) merge by scanning an array of pair
// priorities instead of using the heap: less work per merge for short chains.
inline constexpr size_t kLinearMergeMaxSymbols = 24;

// The same merges as the heap loop (lowest key, then leftmost), on a short chain.
template <class RankFn>
void bpe_merge_linear(std::vector<MergeSymbol>& syms, RankFn&& rank) {
  constexpr double kNone = 1e300;
  double keys[kLinearMergeMaxSymbols];  // keys[i]: pair (symbol i, its next), kNone if none
  int32_t ids[kLinearMergeMaxSymbols];
  auto eval = [&](int32_t i) {
    keys[i] = kNone;
    const int32_t j = syms[i].next;
    if (j < 0) return;
    MergeCandidate c;
    if (rank(syms[i], syms[j], &c)) {
      keys[i] = c.key;
      ids[i] = c.id;
    }
  };
  for (int32_t i = 0; i < static_cast<int32_t>(syms.size()); ++i) eval(i);
  while (true) {
    int32_t best = -1;
    for (int32_t i = 0; i >= 0; i = syms[i].next) {
      if (keys[i] < kNone && (best < 0 || keys[i] < keys[best])) best = i;
    }
    if (best < 0) return;
    MergeSymbol& l = syms[best];
    MergeSymbol& r = syms[l.next];
    l.len += r.len;
    l.id = ids[best];
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = best;
    eval(best);
    if (l.prev >= 0) eval(l.prev);
  }
}

// `rank(const MergeSymbol& a, const MergeSymbol& b, MergeCandidate* c) -> bool` says whether a
// and b (adjacent, a first) may merge. `heap` is scratch space, reused across calls.
template <class RankFn>
void bpe_merge(std::vector<MergeSymbol>& syms, std::vector<MergeHeapEntry>& heap, RankFn&& rank) {
  // std::push_heap keeps the "largest" on top: order so that the smallest key, then the
  // smallest left index, is largest.
  auto worse = [](const MergeHeapEntry& x, const MergeHeapEntry& y) {
    return x.key > y.key || (x.key == y.key && x.left > y.left);
  };
  if (syms.size() <= kLinearMergeMaxSymbols) {
    bpe_merge_linear(syms, rank);
    return;
  }
  heap.clear();
  auto try_push = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    MergeCandidate c;
    if (!rank(syms[l], syms[r], &c)) return;
    heap.push_back({c.key, l, r, syms[l].len + syms[r].len, c.id});
    std::push_heap(heap.begin(), heap.end(), worse);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) try_push(i, i + 1);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const MergeHeapEntry e = heap.back();
    heap.pop_back();
    MergeSymbol& l = syms[e.left];
    MergeSymbol& r = syms[e.right];
    // Stale: either side merged elsewhere since the entry was pushed.
    if (l.len == 0 || r.len == 0 || l.next != e.right || l.len + r.len != e.size) continue;
    l.len += r.len;
    l.id = e.id;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = e.left;
    try_push(l.prev, e.left);
    try_push(e.left, l.next);
  }
}

}  // namespace inflight
