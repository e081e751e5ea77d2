// Token bitmasks: which tokens of a vocabulary may come next, one bit per token.
//
// A mask of a vocabulary of V tokens is words(V) = ceil(V / 32) u32 words; token t is allowed
// when bit (t % 32) of word t / 32 is set. Bits past V are zero. A batch of masks is row-major
// [rows, words(V)] (what ops/token_bitmask.h applies to logits).
#pragma once

#include <cstdint>
#include <span>

namespace inflight {

constexpr int64_t token_bitmask_words(int64_t vocab_size) {
  return (vocab_size + 31) / 32;
}

inline bool token_allowed(std::span<const uint32_t> mask, int32_t token) {
  return ((mask[static_cast<size_t>(token) / 32] >> (static_cast<uint32_t>(token) % 32)) & 1u) != 0;
}

}  // namespace inflight
