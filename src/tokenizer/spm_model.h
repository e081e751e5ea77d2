// SpmModel: SentencePiece-style BPE by scores, as llama.cpp's llm_tokenizer_spm does it for
// GGUF `tokenizer.ggml.model` = "llama" (LLaMA 1/2, Phi-3, Mistral GGUFs).
//
// The word (the whole fragment, spaces already "▁") starts as UTF-8 characters; the adjacent
// pair whose concatenation is a token with the highest score merges first (ties: leftmost).
// A final symbol that is not a token is written as its bytes: <0xXX> tokens, else the token
// spelled as that single byte, else unk.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/token_index.h"
#include "tokenizer/word_model.h"

namespace inflight {

class SpmModel final : public WordModel {
 public:
  // `texts[id]` and `scores[id]` of the whole vocabulary; unk_id may be -1.
  SpmModel(const std::vector<std::string>& texts, const std::vector<float>& scores, int32_t unk_id);

  void encode_word(std::string_view word, std::vector<int32_t>& out) const override;

 private:
  TokenIndex index_;
  std::vector<float> scores_;
  std::array<int32_t, 256> byte_ids_;
  int32_t unk_id_;
};

}  // namespace inflight
