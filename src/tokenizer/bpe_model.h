// BpeModel: merge-list BPE (GPT-2 byte-level, Llama 3, Qwen, tiktoken ranks, HF BPE models).
//
// Two input modes:
//   kBytes  symbols start as single raw bytes; tokens are spelled in raw bytes (byte-level
//           vocabularies are decoded from their GPT-2 spelling at load, tiktoken is raw already),
//           so no per-word byte -> code point mapping is needed.
//   kChars  symbols start as UTF-8 characters, looked up by their text (SentencePiece-style HF
//           BPE, e.g. Mistral); unknown characters fall back to <0xXX> byte tokens or to unk.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe_merge.h"
#include "tokenizer/token_index.h"
#include "tokenizer/word_model.h"

namespace inflight {

struct BpeOptions {
  enum class Input { kBytes, kChars } input = Input::kBytes;
  // A word that is itself a token is emitted whole, without merging (Llama 3, HF ignore_merges).
  bool ignore_merges = false;
  // kChars: a character that is not a token becomes its <0xXX> tokens (when all exist).
  bool byte_fallback = false;
  // A character (or byte) that is not a token becomes unk_id; kNoToken drops it (llama.cpp).
  int32_t unk_id = -1;
  // Consecutive unknown characters become a single unk.
  bool fuse_unk = false;
  // tiktoken: no merge list; a pair merges when its concatenation is a token, the token with the
  // lowest id (= rank) first.
  bool rank_by_concatenation = false;
};

class BpeModel final : public WordModel {
 public:
  explicit BpeModel(BpeOptions options);

  // Registers a token by its spelling in the model's input alphabet. Duplicate spellings keep
  // the first id. Single-byte spellings (kBytes) and "<0xXX>" (kChars) become the byte tokens.
  void add_token(std::string_view spelling, int32_t id);
  // Adds the merge (left, right) with priority `rank` (lower first); the result is the token
  // spelled left + right. Returns false when that token does not exist (the merge is unusable).
  bool add_merge(int32_t left, int32_t right, uint32_t rank);

  int32_t find(std::string_view spelling) const { return index_.find(spelling); }
  std::string_view spelling(int32_t id) const;
  size_t num_merges() const { return merges_.size(); }
  // Byte b's token id in the input alphabet, or -1.
  int32_t byte_id(uint8_t b) const { return byte_ids_[b]; }

  void encode_word(std::string_view word, std::vector<int32_t>& out) const override;

 private:
  void init_symbols(std::string_view word, std::vector<MergeSymbol>& syms) const;
  // The merge loop proper (encode_word adds the ignore_merges shortcut and a word cache).
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  BpeOptions options_;
  TokenIndex index_;
  std::vector<std::string> spellings_;  // by id; empty for ids never added
  PairMap merges_;
  std::array<int32_t, 256> byte_ids_;
  uint64_t serial_;  // identifies this model in the per-thread word cache
};

}  // namespace inflight
