// libFuzzer target: IncrementalDetokenizer over arbitrary id sequences.
//
// Every two input bytes are one id (modulo the vocabulary) of a SentencePiece-style vocabulary
// with byte-fallback tokens, so that characters are split across ids in every possible way.
// Byte 0 picks skip_special and how many ids form the context. Checks: each delta is valid
// UTF-8, at most 3 bytes are ever held back, and the deltas add up to decode() of the ids.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tokenizer/detokenizer.h"
#include "tokenizer/spm_model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace {

using namespace inflight;

// <unk> <s> </s>, 256 <0xXX> tokens, pieces with "▁", multi-byte characters and an emoji.
std::unique_ptr<Tokenizer> make_tokenizer() {
  auto impl = std::make_unique<TokenizerImpl>();
  std::vector<float> scores;
  auto add = [&](std::string text, TokenType type) {
    impl->texts.push_back(std::move(text));
    impl->types.push_back(type);
    scores.push_back(-static_cast<float>(scores.size()));
  };
  add("<unk>", TokenType::kUnknown);
  add("<s>", TokenType::kControl);
  add("</s>", TokenType::kControl);
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", TokenType::kByte);
  }
  for (const char* p : {"\xE2\x96\x81", "\xE2\x96\x81the", "a", "\xC3\xA9", "\xE4\xB8\xAD",
                        "\xF0\x9F\xA6\x99", "\xE2\x96\x81\xE2\x96\x81", "x"}) {
    add(p, TokenType::kNormal);
  }
  add("<user>", TokenType::kUserDefined);
  impl->unk = 0;
  impl->bos = 1;
  impl->eos = 2;
  impl->normalizer.add_space_prefix(" ", PrefixWhen::kAtStartOrAfterSpecial, false);
  impl->normalizer.add_replace(" ", "\xE2\x96\x81");
  impl->first_piece_rule = FirstPieceRule::kStripOneSpace;
  impl->model = std::make_unique<SpmModel>(impl->texts, scores, 0);
  impl->kind = TokenizerKind::kSentencePiece;
  impl->piece_rule = PieceRule::kSentencePiece;
  impl->description = "fuzz:detokenizer";
  impl->finalize();
  return std::make_unique<Tokenizer>(std::move(impl));
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "detokenizer_fuzz: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto tok = make_tokenizer();
  if (size == 0) return 0;
  const bool skip = data[0] & 1;
  std::vector<int32_t> ids;
  for (size_t i = 1; i + 1 < size; i += 2) {
    ids.push_back(static_cast<int32_t>((data[i] | (data[i + 1] << 8)) % tok->vocab_size()));
  }
  const size_t num_context = std::min<size_t>(data[0] >> 1, ids.size());
  const std::span<const int32_t> context(ids.data(), num_context);
  IncrementalDetokenizer detok(*tok, skip, context);
  std::string streamed;
  for (size_t i = num_context; i < ids.size(); ++i) {
    const std::string delta = detok.push(ids[i]);
    check(utf8::is_valid(delta), "delta is not valid UTF-8");
    check(detok.num_pending_bytes() <= 3, "more than 3 bytes held back");
    streamed += delta;
  }
  streamed += detok.finish();
  check(utf8::is_valid(streamed), "text is not valid UTF-8");
  if (num_context == 0) {
    check(streamed == tok->decode(ids, skip), "deltas differ from decode()");
  } else {
    // As a continuation: when the context's bytes are valid UTF-8 on their own, decode() of
    // context + new ends with exactly the streamed text.
    std::string raw_context;
    for (int32_t id : context) raw_context += tok->token_piece(id, skip);
    if (utf8::is_valid(raw_context)) {
      const std::string all = tok->decode(ids, skip);
      check(all.size() >= streamed.size() &&
                all.compare(all.size() - streamed.size(), streamed.size(), streamed) == 0,
            "continuation deltas differ from decode()");
    }
  }
  return 0;
}
