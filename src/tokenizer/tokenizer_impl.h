// TokenizerImpl: the data behind a Tokenizer and the encode/decode pipelines.
//
//   encode: repair UTF-8 -> SpecialTokens cuts fragments -> per text fragment: Normalizer ->
//           PreTokenizer words -> WordModel ids; prefix/suffix ids around it (add_special).
//   decode: per id its piece (bytes) -> drop one leading space of the first piece when the
//           tokenizer prefixes text with one -> repair UTF-8.
//
// Loaders (gguf_vocab.cc, hf_json.cc, tiktoken_file.cc, gpt2_files.cc) fill the fields and call
// finalize(); afterwards the object is immutable.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/token_index.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/word_model.h"

namespace inflight {

// What decode() does to the first piece it writes (the text the tokenizer prefixed itself).
enum class FirstPieceRule {
  kKeep,
  kStripOneSpace,  // one leading ' ' (llama.cpp SPM, HF Strip decoder)
  kRemoveSpaces,   // every ' ' that was a "▁" (HF Metaspace decoder)
};

// How a token's spelling turns into the bytes it decodes to.
enum class PieceRule {
  kByteLevel,      // GPT-2 byte-level spelling -> raw bytes
  kSentencePiece,  // "▁" -> ' ', <0xXX> -> that byte
  kRaw,            // the spelling is the bytes (tiktoken)
};

// Spellings of end-of-turn / end-of-text tokens: they end generation and are control tokens.
std::span<const std::string_view> end_of_generation_names();

class TokenizerImpl {
 public:
  // ---- filled by a loader ----
  std::vector<std::string> texts;  // by id: the spelling
  std::vector<TokenType> types;    // by id
  TokenizerKind kind = TokenizerKind::kByteLevelBpe;
  PieceRule piece_rule = PieceRule::kByteLevel;
  std::string description;
  int32_t bos = kNoToken, eos = kNoToken, pad = kNoToken, unk = kNoToken;
  std::vector<int32_t> eog;         // extra end-of-generation ids (eos and names are added)
  std::vector<int32_t> prefix_ids;  // added before the text by encode(add_special)
  std::vector<int32_t> suffix_ids;  // added after it
  FirstPieceRule first_piece_rule = FirstPieceRule::kKeep;
  SpecialTokens specials;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::unique_ptr<WordModel> model;

  // Validates ids, builds the text index and the decode pieces, completes eog.
  void finalize();

  // ---- built by finalize() ----
  TokenIndex text_index;
  std::vector<std::string> pieces;  // by id: decoded bytes
  bool add_bos = false, add_eos = false;

  int32_t vocab_size() const { return static_cast<int32_t>(texts.size()); }
  bool valid(int32_t id) const { return id >= 0 && id < vocab_size(); }
  // An id past the tokenizer's vocabulary: a model's padding row, decoded as nothing.
  bool padding(int32_t id) const { return id >= vocab_size(); }
  bool is_special(int32_t id) const {
    return valid(id) && (types[id] == TokenType::kControl || types[id] == TokenType::kUnknown);
  }
  void check_id(int32_t id) const;
  // The bytes of `id` (which must be valid) at the start of the text, or in the middle.
  std::string_view piece(int32_t id, bool first, std::string& storage) const;

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special) const;
};

}  // namespace inflight
