// IncrementalDetokenizer properties: deltas are whole UTF-8 characters and add up to decode().
#include <gtest/gtest.h>

#include <random>

#include "core/check.h"
#include "test_data.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"
#include "tokenizer/utf8.h"

namespace inflight {
namespace {

// Streams `ids` through a detokenizer; checks every delta and returns their concatenation.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip,
                   std::span<const int32_t> context = {}) {
  IncrementalDetokenizer detok(tok, skip, context);
  std::string all;
  for (int32_t id : ids) {
    const std::string delta = detok.push(id);
    EXPECT_TRUE(utf8::is_valid(delta)) << "invalid UTF-8 delta after id " << id;
    EXPECT_LE(detok.num_pending_bytes(), 3u);
    all += delta;
  }
  all += detok.finish();
  EXPECT_EQ(detok.text(), all);
  EXPECT_EQ(detok.num_tokens(), ids.size());
  return all;
}

class DetokenizerProperty : public ::testing::TestWithParam<std::string> {};

TEST_P(DetokenizerProperty, DeltasConcatenateToDecode) {
  const std::string p =
      testing::shared_file("tokenizers/gguf-vocab/ggml-vocab-" + GetParam() + ".gguf");
  if (p.empty()) GTEST_SKIP() << "skipped: shared data vocabulary '" << GetParam() << "' not found";
  const auto tok = Tokenizer::from_path(p);
  std::mt19937 rng(42);
  // Random ids: arbitrary byte soup, special tokens, byte tokens split anywhere, and the
  // padding ids of a model whose vocabulary is larger than the tokenizer's (decoded as nothing).
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> ids(rng() % 20);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % (tok->vocab_size() + 8));
    for (bool skip : {false, true}) {
      ASSERT_EQ(stream(*tok, ids, skip), tok->decode(ids, skip)) << "trial " << trial;
    }
  }
  // Real text with multi-byte characters that tokens split.
  const std::string texts[] = {
      "Hello world",       " leading space", "🦙🚀 😶‍🌫️ emoji soup",
      "нещо на Български", "កាន់តែពិសេស",      "mixed 中文 text\n\n\tend "};
  for (const std::string& t : texts) {
    const auto ids = tok->encode(t, true, false);
    EXPECT_EQ(stream(*tok, ids, true), tok->decode(ids, true)) << t;
    EXPECT_EQ(stream(*tok, ids, false), tok->decode(ids, false)) << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, DetokenizerProperty,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "qwen2", "llama-bpe"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

TEST(Detokenizer, PaddingIdsDecodeAsNothing) {
  const std::string p = testing::shared_file("tokenizers/gguf-vocab/ggml-vocab-qwen2.gguf");
  if (p.empty()) GTEST_SKIP() << "skipped: qwen2 vocabulary not found";
  const auto tok = Tokenizer::from_path(p);
  const auto hello = tok->encode("Hello world", false, false);
  std::vector<int32_t> padded = hello;
  padded.insert(padded.begin() + 1, tok->vocab_size() + 3);
  EXPECT_EQ(tok->decode(padded, true), tok->decode(hello, true));
  EXPECT_EQ(stream(*tok, padded, true), "Hello world");
  EXPECT_EQ(tok->token_piece(tok->vocab_size(), false), "");
  EXPECT_THROW(tok->decode(std::vector<int32_t>{-1}, true), Error);
}

TEST(Detokenizer, SentencePieceFirstTokenAndContinuation) {
  const std::string p = testing::shared_file("tokenizers/gguf-vocab/ggml-vocab-llama-spm.gguf");
  if (p.empty()) GTEST_SKIP() << "skipped: llama-spm vocabulary not found";
  const auto tok = Tokenizer::from_path(p);
  const auto prompt = tok->encode("Hello", true, false);         // <s> ▁Hello
  const auto reply = tok->encode(" world 🦙!", false, false);  // ▁▁world ... bytes
  // Alone, the first token loses its "▁" as in decode().
  EXPECT_EQ(stream(*tok, reply, true), tok->decode(reply, true));
  // As a continuation of the prompt, the reply keeps its leading space.
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), reply.begin(), reply.end());
  EXPECT_EQ(tok->decode(prompt, true) + stream(*tok, reply, true, prompt), tok->decode(all, true));
  // The llama emoji is four byte tokens: nothing comes out until the fourth.
  IncrementalDetokenizer detok(*tok, true);
  std::vector<std::string> deltas;
  for (int32_t id : tok->encode("🦙", false, false)) deltas.push_back(detok.push(id));
  ASSERT_EQ(deltas.size(), 5u);  // ▁ then <0xF0> <0x9F> <0xA6> <0x99>
  EXPECT_EQ(deltas[1], "");
  EXPECT_EQ(deltas[3], "");
  EXPECT_EQ(deltas[4], "🦙");
  // A dangling partial character is flushed as U+FFFD by finish().
  IncrementalDetokenizer cut(*tok, true);
  EXPECT_EQ(cut.push(*tok->find_token("<0xF0>")), "");
  EXPECT_EQ(cut.num_pending_bytes(), 1u);
  EXPECT_EQ(cut.finish(), "\xEF\xBF\xBD");
  EXPECT_THROW(cut.push(-1), Error);
  EXPECT_EQ(cut.push(tok->vocab_size()), "");  // a padding id
}

}  // namespace
}  // namespace inflight
