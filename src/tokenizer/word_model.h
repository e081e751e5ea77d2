// WordModel: turns one pre-tokenized word into token ids (BPE by merges, by ranks, by scores).
// Implementations are immutable after construction and safe to call from many threads.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace inflight {

class WordModel {
 public:
  virtual ~WordModel() = default;
  // Appends the ids of `word` (valid UTF-8, non-empty) to `out`.
  virtual void encode_word(std::string_view word, std::vector<int32_t>& out) const = 0;
};

}  // namespace inflight
