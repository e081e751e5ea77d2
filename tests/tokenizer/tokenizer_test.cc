// The Tokenizer API on real vocabularies: special tokens, BOS/EOS, decode, errors, threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "core/check.h"
#include "test_data.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"

namespace inflight {
namespace {

std::unique_ptr<Tokenizer> load_vocab(const std::string& name) {
  const std::string p = testing::shared_file("tokenizers/gguf-vocab/ggml-vocab-" + name + ".gguf");
  return p.empty() ? nullptr : Tokenizer::from_path(p);
}

#define REQUIRE_VOCAB(var, name)     \
  const auto var = load_vocab(name); \
  if (!var) GTEST_SKIP() << "skipped: shared data vocabulary '" << name << "' not found"

TEST(SmolLM2, SpecialTokensBosEosAndChatMarkers) {
  INFLIGHT_REQUIRE_MODEL(model);
  const auto tok = Tokenizer::from_path(model);
  EXPECT_EQ(tok->vocab_size(), 49152);
  EXPECT_EQ(tok->kind(), TokenizerKind::kByteLevelBpe);
  EXPECT_EQ(tok->description(), "gguf:gpt2/smollm");
  EXPECT_EQ(tok->token_text(tok->bos_id()), "<|im_start|>");
  EXPECT_EQ(tok->token_text(tok->eos_id()), "<|im_end|>");
  EXPECT_FALSE(tok->add_bos());  // tokenizer.ggml.add_bos_token = false
  EXPECT_TRUE(tok->is_eog(tok->eos_id()));
  EXPECT_TRUE(tok->is_eog(*tok->find_token("<|endoftext|>")));
  EXPECT_FALSE(tok->is_eog(*tok->find_token("Hello")));

  const std::string chat = "<|im_start|>user\nHi there<|im_end|>\n";
  const auto parsed = tok->encode(chat, true, true);
  ASSERT_GE(parsed.size(), 4u);
  EXPECT_EQ(parsed.front(), 1);  // <|im_start|> as one token
  EXPECT_EQ(std::count(parsed.begin(), parsed.end(), 2), 1);
  const auto as_text = tok->encode(chat, true, false);
  EXPECT_EQ(std::count(as_text.begin(), as_text.end(), 1), 0);  // spelled out, not matched
  EXPECT_EQ(tok->decode(parsed, false), chat);
  EXPECT_EQ(tok->decode(as_text, false), chat);
  EXPECT_EQ(tok->decode(parsed, true), "user\nHi there\n");
}

TEST(SmolLM2, RoundTripsTheCorpusSample) {
  INFLIGHT_REQUIRE_MODEL(model);
  const auto tok = Tokenizer::from_path(model);
  const std::string texts[] = {
      "The quick brown fox. 1234567 numbers split into digits",
      "  leading spaces, trailing spaces   ",
      "tabs\tand\nnewlines\r\n\n",
      "emoji 😶‍🌫️🦙 and CJK 我想在apple工作 and Ελληνικά",
      "code: for (int i = 0; i < n; ++i) { x += y[i]; }",
      std::string(100000, 'a'),
  };
  for (const std::string& t : texts) {
    EXPECT_EQ(tok->decode(tok->encode(t, false, false), false), t) << t.substr(0, 60);
  }
}

TEST(LlamaSpm, LeadingSpaceBosAndByteFallback) {
  REQUIRE_VOCAB(tok, "llama-spm");
  EXPECT_EQ(tok->kind(), TokenizerKind::kSentencePiece);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_TRUE(tok->strips_leading_space());
  const auto ids = tok->encode("Hello world", true, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 15043, 3186}));  // <s> ▁Hello ▁world
  EXPECT_EQ(tok->decode(ids, true), "Hello world");
  EXPECT_EQ(tok->decode(ids, false), "<s> Hello world");
  // 🦙 has no token: four <0xXX> byte tokens, decoded back to the character.
  const auto llama = tok->encode("🦙", false, false);
  EXPECT_EQ(llama, (std::vector<int32_t>{29871, 243, 162, 169, 156}));
  EXPECT_EQ(tok->decode(llama, true), "🦙");
  EXPECT_EQ(tok->token_piece(243, true), "\xF0");
  EXPECT_EQ(tok->token_type(243), TokenType::kByte);
  // After a special token the text gets its own space prefix again.
  const auto after = tok->encode("<s>Hi", false, true);
  EXPECT_EQ(after.front(), 1);
  EXPECT_EQ(tok->token_text(after[1]), "\xE2\x96\x81Hi");
  // Lone bytes decode to U+FFFD, never to invalid UTF-8.
  EXPECT_EQ(tok->decode(std::vector<int32_t>{243, 162}, true), "\xEF\xBF\xBD");
}

TEST(LlamaBpe, AddsBosByDefaultAndKnowsEndOfTurn) {
  REQUIRE_VOCAB(tok, "llama-bpe");  // no add_bos_token key: llama.cpp's default for llama-bpe
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_EQ(tok->encode("Hello", true, false), (std::vector<int32_t>{128000, 9906}));
  EXPECT_EQ(tok->encode("", true, false), (std::vector<int32_t>{128000}));
  EXPECT_TRUE(tok->encode("", false, false).empty());
  EXPECT_TRUE(tok->is_eog(*tok->find_token("<|eot_id|>")));
  EXPECT_TRUE(tok->is_eog(*tok->find_token("<|end_of_text|>")));
  EXPECT_TRUE(tok->is_special(*tok->find_token("<|eot_id|>")));
  EXPECT_EQ(tok->encode("<|eot_id|>", false, true).size(), 1u);
}

TEST(Tokenizer, InvalidUtf8InputIsRepairedNotRejected) {
  REQUIRE_VOCAB(tok, "llama-bpe");
  const auto ids = tok->encode(
      "a\xFF"
      "b\xE2\x82",
      false, false);
  EXPECT_EQ(tok->decode(ids, false),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
  EXPECT_EQ(ids, tok->encode("a\xEF\xBF\xBD"
                             "b\xEF\xBF\xBD",
                             false, false));
}

TEST(Tokenizer, ErrorsNameTheProblem) {
  REQUIRE_VOCAB(tok, "gpt-2");
  try {
    tok->decode(std::vector<int32_t>{1, -7}, false);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("-7"), std::string::npos) << e.what();
  }
  // Past the vocabulary: a model's padding id, decoded as nothing.
  EXPECT_EQ(tok->decode(std::vector<int32_t>{50257}, false), "");
  EXPECT_THROW(tok->token_text(-1), Error);
  EXPECT_FALSE(tok->is_special(-5));
  try {
    Tokenizer::from_path("/nonexistent/tokenizer.json");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

TEST(Tokenizer, ConcurrentEncodeGivesIdenticalResults) {
  REQUIRE_VOCAB(tok, "qwen2");
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) {
    texts.push_back("Thread text " + std::to_string(i * 7919) + " with 中文 and emoji 🚀 " +
                    std::string(i * 13, 'x') + "  \n");
  }
  std::vector<std::vector<int32_t>> want;
  for (const auto& t : texts) want.push_back(tok->encode(t, true, true));
  std::vector<std::future<bool>> results;
  for (int th = 0; th < 4; ++th) {
    results.push_back(std::async(std::launch::async, [&] {
      for (int rep = 0; rep < 20; ++rep) {
        for (size_t i = 0; i < texts.size(); ++i) {
          if (tok->encode(texts[i], true, true) != want[i]) return false;
          if (tok->decode(want[i], false) != texts[i]) return false;
        }
      }
      return true;
    }));
  }
  for (auto& r : results) EXPECT_TRUE(r.get());
}

TEST(Tokenizer, VeryLongWordsStayFast) {
  REQUIRE_VOCAB(tok, "llama-bpe");
  // One 2 MB "word" of mixed letters: the merge loop must be O(n log n), not quadratic.
  std::string word;
  for (int i = 0; i < (1 << 21); ++i) word.push_back("abcdefghij"[(i * 7 + i / 3) % 10]);
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tok->encode(word, false, false);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(tok->decode(ids, false), word);
  EXPECT_LT(seconds, 10.0);
}

TEST(Tiktoken, Cl100kKnownIdsAndSpecials) {
  const std::string path = testing::shared_file("tokenizers/tiktoken/cl100k_base.tiktoken");
  if (path.empty()) GTEST_SKIP() << "skipped: cl100k_base.tiktoken not found";
  const auto tok = Tokenizer::from_path(path);
  EXPECT_EQ(tok->kind(), TokenizerKind::kTiktoken);
  EXPECT_EQ(tok->vocab_size(), 100277);
  EXPECT_EQ(tok->encode("hello world", false, false), (std::vector<int32_t>{15339, 1917}));
  EXPECT_EQ(tok->encode("<|endoftext|>", false, true), (std::vector<int32_t>{100257}));
  EXPECT_GT(tok->encode("<|endoftext|>", false, false).size(), 1u);
  EXPECT_EQ(tok->eos_id(), 100257);
  EXPECT_TRUE(tok->is_eog(100257));
}

TEST(HfJson, Llama31BosAndDirectoryLoading) {
  INFLIGHT_REQUIRE_DATA(config, "tokenizers/hf/llama3_1/tokenizer_config.json");
  const std::string json = testing::shared_file("tokenizers/hf/llama3_1/tokenizer.json");
  ASSERT_FALSE(json.empty());
  // Put tokenizer.json next to its config so that from_path(dir) finds both.
  const auto dir = testing::scratch_dir("hf_llama3_1");
  std::filesystem::copy_file(json, dir / "tokenizer.json");
  std::filesystem::copy_file(config, dir / "tokenizer_config.json");
  const auto tok = Tokenizer::from_path(dir.string());
  EXPECT_EQ(tok->vocab_size(), 128256);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->token_text(tok->bos_id()), "<|begin_of_text|>");
  const auto ids = tok->encode("Hello world", true, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{128000, 9906, 1917}));
  EXPECT_TRUE(tok->is_eog(*tok->find_token("<|eot_id|>")));
  EXPECT_EQ(tok->decode(ids, true), "Hello world");
}

}  // namespace
}  // namespace inflight
