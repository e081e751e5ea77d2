// Text in and out: the real SmolLM2 tokenizer over a tiny random model of the same vocabulary.
// Stop strings are taken from what the model actually writes, so they cross token boundaries.
#include <gtest/gtest.h>

#include "engine_harness.h"
#include "test_data.h"

namespace inflight::testing {
namespace {

class TextEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    INFLIGHT_REQUIRE_MODEL(path);
    tokenizer_ = Tokenizer::from_path(path);
    EngineConfig c;
    c.block_size = 4;
    c.num_kv_blocks = 256;
    engine_ = make_engine(c, tiny_runner(tiny_model(tokenizer_->vocab_size())), tokenizer_);
    ASSERT_NE(engine_, nullptr);
  }

  Request text(const std::string& prompt, int32_t max_tokens) {
    Request r;
    r.prompt = prompt;
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = max_tokens;
    return r;
  }

  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(TextEngine, TextPromptsAreTokenizedAndOutputsDecodeLikeTheTokenizer) {
  const std::string prompt = "The quick brown fox jumps over the lazy dog. Once upon a time,";
  const Completion c = run_all(*engine_, {text(prompt, 24)})[0];
  ASSERT_TRUE(c.status.ok()) << c.status.to_string();
  EXPECT_EQ(c.last.usage.prompt_tokens,
            static_cast<int32_t>(tokenizer_->encode(prompt, true, true).size()));
  ASSERT_EQ(c.tokens[0].size(), 24u);
  EXPECT_EQ(c.text[0], tokenizer_->decode(c.tokens[0], /*skip_special=*/true));
  // Same request by token ids: same tokens.
  Request ids = text("", 24);
  ids.prompt_token_ids = tokenizer_->encode(prompt, true, true);
  EXPECT_EQ(run_all(*engine_, {ids})[0].tokens, c.tokens);
}

TEST_F(TextEngine, StopStringsAcrossTokensAreTrimmedAndNeverLeak) {
  const Request base = text("Numbers and letters: a1 b2 c3 d4 e5 f6 g7", 40);
  const Completion free_run = run_all(*engine_, {base})[0];
  const std::string& full = free_run.text[0];
  // A 3-byte ASCII stop string from the middle of the text, spanning a token boundary.
  const std::vector<int32_t>& ref = free_run.tokens[0];
  std::vector<size_t> boundaries;  // byte offsets where a token's text ends
  for (size_t k = 1; k <= ref.size(); ++k) {
    boundaries.push_back(tokenizer_->decode(std::span(ref).first(k), true).size());
  }
  std::string stop;
  for (size_t b : boundaries) {
    if (b < full.size() / 4 || b + 2 > full.size() || b < 1) continue;
    const std::string s = full.substr(b - 1, 3);
    if (std::all_of(s.begin(), s.end(), [](char ch) { return ch > 32 && ch < 127; })) {
      stop = s;
      break;
    }
  }
  if (stop.empty()) GTEST_SKIP() << "no ASCII token boundary in: " << full;
  const size_t at = full.find(stop);

  Request r = base;
  r.sampling.stop = {"never-appears", stop};
  const Completion c = run_all(*engine_, {r})[0];
  EXPECT_EQ(c.text[0], full.substr(0, at)) << "stop '" << stop << "' in: " << full;
  EXPECT_EQ(c.finish[0], FinishReason::kStop);
  EXPECT_EQ(c.last.stop_string, stop);
  std::string shown;
  for (const auto& o : c.outputs) {
    shown += o.text;
    EXPECT_EQ(full.substr(0, at).compare(0, shown.size(), shown), 0)
        << "text beyond the stop was shown: " << shown;
  }
  const auto& toks = c.tokens[0];
  EXPECT_TRUE(std::equal(toks.begin(), toks.end(), free_run.tokens[0].begin()));
  EXPECT_LT(toks.size(), free_run.tokens[0].size());

  r.sampling.include_stop_str_in_output = true;
  EXPECT_EQ(run_all(*engine_, {r})[0].text[0], full.substr(0, at + stop.size()));
}

TEST_F(TextEngine, TextFlushesWhenTheOutputEndsForAnotherReason) {
  // A stop string that the output starts but never completes: its held bytes come out at
  // max_tokens.
  const Request base = text("Hello", 12);
  const Completion free_run = run_all(*engine_, {base})[0];
  const std::string& full = free_run.text[0];
  ASSERT_FALSE(full.empty());
  Request r = base;
  r.sampling.stop = {full.substr(full.size() - 1) + "\x01\x02"};
  const Completion c = run_all(*engine_, {r})[0];
  EXPECT_EQ(c.text[0], full);
  EXPECT_EQ(c.finish[0], FinishReason::kLength);
}

TEST_F(TextEngine, ChoicesEachGetTheirOwnText) {
  Request r = text("In the beginning", 10);
  r.sampling.n = 3;
  r.sampling.temperature = 2.0f;
  r.sampling.seed = 5;
  const Completion c = run_all(*engine_, {r})[0];
  ASSERT_EQ(c.text.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c.text[static_cast<size_t>(i)],
              tokenizer_->decode(c.tokens[static_cast<size_t>(i)], true));
    EXPECT_EQ(c.finish[static_cast<size_t>(i)], FinishReason::kLength);
  }
  EXPECT_EQ(c.last.usage.completion_tokens, 30);
}

}  // namespace
}  // namespace inflight::testing
