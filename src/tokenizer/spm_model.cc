#include "tokenizer/spm_model.h"

#include <algorithm>

#include "core/check.h"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/utf8.h"

namespace inflight {

SpmModel::SpmModel(const std::vector<std::string>& texts, const std::vector<float>& scores,
                   int32_t unk_id)
    : scores_(scores), unk_id_(unk_id) {
  INFLIGHT_CHECK_CODE(scores.size() == texts.size(), ErrorCode::kInvalidFile,
                      "SentencePiece vocabulary has {} tokens but {} scores", texts.size(),
                      scores.size());
  for (size_t id = 0; id < texts.size(); ++id) index_.insert(texts[id], static_cast<int32_t>(id));
  // Byte fallback: "<0xXX>" first, else a token spelled as the single byte (llama.cpp order).
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char tok[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    int32_t id = index_.find(std::string_view(tok, 6));
    if (id < 0) {
      const char c = static_cast<char>(b);
      id = index_.find(std::string_view(&c, 1));
    }
    byte_ids_[b] = id;
  }
}

void SpmModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<MergeSymbol> syms;
  thread_local std::vector<MergeHeapEntry> heap;
  syms.clear();
  for (uint32_t i = 0; i < word.size();) {
    const auto n = static_cast<uint32_t>(
        std::min<size_t>(utf8::sequence_length(static_cast<uint8_t>(word[i])), word.size() - i));
    const auto k = static_cast<int32_t>(syms.size());
    syms.push_back({i, n, index_.find(word.substr(i, n)), k - 1, -1});
    if (k > 0) syms[k - 1].next = k;
    i += n;
  }
  if (syms.empty()) return;
  bpe_merge(syms, heap, [&](const MergeSymbol& a, const MergeSymbol& b, MergeCandidate* c) {
    const int32_t id = index_.find(word.substr(a.begin, a.len + b.len));
    if (id < 0) return false;
    *c = {-static_cast<double>(scores_[id]), id};
    return true;
  });
  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const MergeSymbol& s = syms[i];
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    for (uint32_t k = 0; k < s.len; ++k) {
      const int32_t id = byte_ids_[static_cast<uint8_t>(word[s.begin + k])];
      if (id >= 0) {
        out.push_back(id);
      } else if (unk_id_ >= 0) {
        out.push_back(unk_id_);
      }
    }
  }
}

}  // namespace inflight
