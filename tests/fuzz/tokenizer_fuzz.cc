// libFuzzer target: the tokenizer's encode path and its GGUF vocabulary loader.
//
// Input byte 0 picks the mode:
//   even  encode the rest as text with a small byte-level BPE vocabulary and a SentencePiece one
//         (both built in-process); decode(encode(x)) must give back x with invalid UTF-8
//         repaired, the byte-level one exactly.
//   odd   treat the rest as a GGUF file; when it parses and loads as a tokenizer, encode and
//         decode a fixed text with it. Malformed files may throw inflight::Error, nothing else.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/check.h"
#include "formats/gguf.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/spm_model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace {

using namespace inflight;

// 256 byte tokens, a few merges over "the in an Ġ", two control tokens.
std::unique_ptr<Tokenizer> byte_level_tokenizer() {
  auto impl = std::make_unique<TokenizerImpl>();
  BpeOptions options;
  auto model = std::make_unique<BpeModel>(options);
  for (int b = 0; b < 256; ++b) {
    impl->texts.push_back(byte_level::encode(std::string(1, static_cast<char>(b))));
    impl->types.push_back(TokenType::kNormal);
    model->add_token(std::string(1, static_cast<char>(b)), b);
  }
  const char* merged[] = {" t", "th", "the", " the", "in", " in", "an", "  "};
  for (const char* m : merged) {
    const auto id = static_cast<int32_t>(impl->texts.size());
    impl->texts.push_back(byte_level::encode(m));
    impl->types.push_back(TokenType::kNormal);
    model->add_token(m, id);
  }
  auto id_of = [&](std::string_view s) { return model->find(s); };
  uint32_t rank = 0;
  for (auto [l, r] : {std::pair{" ", "t"},
                      {"t", "h"},
                      {"th", "e"},
                      {" ", "the"},
                      {"i", "n"},
                      {" ", "in"},
                      {"a", "n"},
                      {" ", " "}}) {
    model->add_merge(id_of(l), id_of(r), rank++);
  }
  for (const char* special : {"<|s|>", "<|e|>"}) {
    impl->texts.push_back(special);
    impl->types.push_back(TokenType::kControl);
  }
  impl->specials = SpecialTokens({{"<|s|>", 264, false}, {"<|e|>", 265, false}},
                                 SpecialTokens::Rule::kLeftmostLongest);
  impl->pre_tokenizer.add_regex(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  impl->model = std::move(model);
  impl->bos = 264;
  impl->eos = 265;
  impl->prefix_ids = {264};
  impl->description = "fuzz:byte-level";
  impl->finalize();
  return std::make_unique<Tokenizer>(std::move(impl));
}

// <unk> <s> </s>, 256 byte tokens, "▁" and a few pieces with scores.
std::unique_ptr<Tokenizer> sentencepiece_tokenizer() {
  auto impl = std::make_unique<TokenizerImpl>();
  std::vector<float> scores;
  auto add = [&](std::string text, TokenType type, float score) {
    impl->texts.push_back(std::move(text));
    impl->types.push_back(type);
    scores.push_back(score);
  };
  add("<unk>", TokenType::kUnknown, 0);
  add("<s>", TokenType::kControl, 0);
  add("</s>", TokenType::kControl, 0);
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", TokenType::kByte, 0);
  }
  const char* pieces[] = {"\xE2\x96\x81", "\xE2\x96\x81t",   "h", "e",
                          "he",           "\xE2\x96\x81the", "t", "a"};
  float score = -1;
  for (const char* p : pieces) add(p, TokenType::kNormal, score--);
  impl->unk = 0;
  impl->bos = 1;
  impl->eos = 2;
  impl->prefix_ids = {1};
  impl->normalizer.add_space_prefix(" ", PrefixWhen::kAtStartOrAfterSpecial, false);
  impl->normalizer.add_replace(" ", "\xE2\x96\x81");
  impl->first_piece_rule = FirstPieceRule::kStripOneSpace;
  impl->specials = SpecialTokens({{"<s>", 1, false}, {"</s>", 2, false}},
                                 SpecialTokens::Rule::kLongestTokenFirst);
  impl->model = std::make_unique<SpmModel>(impl->texts, scores, 0);
  impl->kind = TokenizerKind::kSentencePiece;
  impl->piece_rule = PieceRule::kSentencePiece;
  impl->description = "fuzz:sentencepiece";
  impl->finalize();
  return std::make_unique<Tokenizer>(std::move(impl));
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", what);
    std::abort();
  }
}

void fuzz_encode(std::string_view text) {
  static const auto bl = byte_level_tokenizer();
  static const auto sp = sentencepiece_tokenizer();
  std::string repaired;
  utf8::repair(text, repaired, true);
  for (bool parse : {false, true}) {
    const auto ids = bl->encode(text, true, parse);
    check(bl->decode(ids, true) == repaired || parse, "byte-level round trip");
    check(utf8::is_valid(bl->decode(ids, false)), "byte-level decode is not UTF-8");
    const auto sp_ids = sp->encode(text, true, parse);
    const std::string sp_text = sp->decode(sp_ids, true);
    check(utf8::is_valid(sp_text), "sentencepiece decode is not UTF-8");
    if (!parse && repaired.find("\xE2\x96\x81") == std::string::npos) {
      check(sp_text == repaired, "sentencepiece round trip");
    }
  }
}

void fuzz_gguf(const uint8_t* data, size_t size) {
  try {
    const auto gguf = GgufFile::parse(data, size, "fuzz.gguf");
    const auto tok = Tokenizer::from_gguf(*gguf);
    const auto ids = tok->encode("Hello <s> world 🦙 \xFF", true, true);
    check(utf8::is_valid(tok->decode(ids, false)), "decode is not UTF-8");
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    fuzz_encode(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  } else {
    fuzz_gguf(data + 1, size - 1);
  }
  return 0;
}
