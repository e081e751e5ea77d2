// GrammarCompiler and GrammarMatcher over a small byte-level BPE vocabulary (printable ASCII,
// space, newline, a few multi-byte tokens and <|endoftext|>), written to a tokenizer.json.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "grammar/grammar_compiler.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_bitmask.h"
#include "tokenizer/tokenizer.h"

namespace inflight {
namespace {

using Kind = GrammarSpec::Kind;

// Byte-level spellings: 'Ġ' is a space, 'Ċ' a newline.
const std::vector<std::string> kMultiByteTokens = {"{\"",   "\":",   "\":Ġ", "ab",   "12", "true",
                                                   "false", "Ġtrue", "\"}",  ",Ġ\"", "ĠĠ", "a1"};

class GrammarTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
    int32_t id = 0;
    for (char c = '!'; c <= '~'; ++c) vocab[std::string(1, c)] = id++;
    vocab["Ġ"] = id++;
    vocab["Ċ"] = id++;
    for (const std::string& t : kMultiByteTokens) vocab[t] = id++;
    const nlohmann::ordered_json j = {
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
        {"pre_tokenizer", {{"type", "ByteLevel"}}},
        {"decoder", {{"type", "ByteLevel"}}},
        {"added_tokens", {{{"id", id}, {"content", "<|endoftext|>"}, {"special", true}}}}};
    const auto dir = std::filesystem::temp_directory_path() /
                     ("inflight_grammar_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto path = dir / "tokenizer.json";
    std::ofstream(path) << j.dump();
    tokenizer_ = Tokenizer::from_path(path.string()).release();
    std::filesystem::remove_all(dir);
    // A padded LM head: ids past the tokenizer's vocabulary are never allowed.
    compiler_ = new GrammarCompiler(*tokenizer_, tokenizer_->vocab_size() + 5, 1);
  }
  static void TearDownTestSuite() {
    delete compiler_;
    delete tokenizer_;
  }

  static int32_t id(const std::string& spelling) {
    const std::optional<int32_t> t = tokenizer_->find_token(spelling);
    EXPECT_TRUE(t.has_value()) << spelling;
    return t.value_or(0);
  }
  static std::string piece(int32_t t) { return tokenizer_->token_piece(t, false); }
  static int64_t vocab() { return compiler_->vocab_size(); }
  static int32_t eos() { return tokenizer_->eos_id(); }

  static std::vector<uint32_t> mask_of(GrammarMatcher& m) {
    std::vector<uint32_t> mask(static_cast<size_t>(token_bitmask_words(vocab())), 0xdeadbeef);
    m.fill_mask(mask);
    return mask;
  }

  static inline Tokenizer* tokenizer_ = nullptr;
  static inline GrammarCompiler* compiler_ = nullptr;
};

TEST_F(GrammarTest, ChoiceMaskIsExactlyTheTokensThatKeepAPrefix) {
  const std::vector<std::string> choices = {"ab", "12", "true", "a1b"};
  GrammarSpec spec{Kind::kChoice, "", choices};
  const auto grammar = compiler_->compile(spec);
  const int32_t stop = eos();
  std::mt19937 rng(3);
  for (int walk = 0; walk < 20; ++walk) {
    GrammarMatcher m(grammar, std::vector<int32_t>{stop});
    std::string text;
    while (!m.terminated()) {
      const std::vector<uint32_t> mask = mask_of(m);
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < vocab(); ++t) {
        bool expected = false;
        if (t == stop) {
          expected = std::find(choices.begin(), choices.end(), text) != choices.end();
        } else if (t < tokenizer_->vocab_size() && !tokenizer_->is_special(t)) {
          const std::string next = text + piece(t);
          for (const std::string& c : choices) expected |= c.starts_with(next);
        }
        ASSERT_EQ(token_allowed(mask, t), expected)
            << "after '" << text << "' token " << t << " '" << (t < stop ? piece(t) : "") << "'";
        if (expected) allowed.push_back(t);
      }
      ASSERT_FALSE(allowed.empty());
      const int32_t t = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept(t));
      if (t != stop) text += piece(t);
      EXPECT_EQ(m.complete(),
                std::find(choices.begin(), choices.end(), text) != choices.end() || t == stop);
    }
    EXPECT_FALSE(m.accept(stop)) << "nothing follows the stop token";
  }
}

TEST_F(GrammarTest, JsonSchemaAcceptsConformingTokensOnly) {
  const auto grammar = compiler_->compile(
      {Kind::kJsonSchema,
       R"({"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]})"});
  GrammarMatcher m(grammar, std::vector<int32_t>{eos()});
  EXPECT_FALSE(m.accept(id("ab")));
  EXPECT_FALSE(m.accept(eos())) << "a stop token only once the object is whole";
  for (const char* t : {"{\"", "a", "\":Ġ"}) ASSERT_TRUE(m.accept(id(t))) << t;
  EXPECT_FALSE(m.accept(id("1")));
  const std::vector<uint32_t> mask = mask_of(m);
  EXPECT_TRUE(token_allowed(mask, id("true")));
  EXPECT_TRUE(token_allowed(mask, id("false")));
  EXPECT_TRUE(token_allowed(mask, id("t")));
  EXPECT_FALSE(token_allowed(mask, id("1")));
  EXPECT_FALSE(token_allowed(mask, eos()));
  for (int64_t t = tokenizer_->vocab_size(); t < vocab(); ++t) {
    EXPECT_FALSE(token_allowed(mask, static_cast<int32_t>(t))) << "padding id " << t;
  }
  ASSERT_TRUE(m.accept(id("true")));
  EXPECT_FALSE(m.complete());
  ASSERT_TRUE(m.accept(id("}")));
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(token_allowed(mask_of(m), eos()));
  ASSERT_TRUE(m.accept(eos()));
  EXPECT_TRUE(m.terminated());
}

TEST_F(GrammarTest, RegexJsonObjectAndEbnf) {
  GrammarMatcher re(compiler_->compile({Kind::kRegex, "[0-9]{2}x?"}), std::vector<int32_t>{eos()});
  EXPECT_FALSE(re.accept(id("a")));
  ASSERT_TRUE(re.accept(id("12")));
  EXPECT_TRUE(re.complete());
  EXPECT_FALSE(re.accept(id("1")));
  ASSERT_TRUE(re.accept(id("x")));

  GrammarMatcher obj(compiler_->compile({Kind::kJsonObject}), std::vector<int32_t>{eos()});
  EXPECT_FALSE(obj.accept(id("true"))) << "a JSON object, not any JSON value";
  EXPECT_TRUE(obj.accept(id("{")));

  GrammarMatcher ebnf(compiler_->compile({Kind::kEbnf, R"(root ::= "a" ("b" | "1")+)"}),
                      std::vector<int32_t>{eos()});
  ASSERT_TRUE(ebnf.accept(id("ab")));
  ASSERT_TRUE(ebnf.accept(id("1")));
  EXPECT_FALSE(ebnf.accept(id("a")));
  EXPECT_TRUE(ebnf.accept(eos()));
}

TEST_F(GrammarTest, InvalidConstraintsAreInvalidArguments) {
  const std::vector<GrammarSpec> bad = {
      {Kind::kJsonSchema, "{"},         {Kind::kRegex, "(ab"},   {Kind::kEbnf, "root ::= "},
      {Kind::kEbnf, "start ::= \"a\""}, {Kind::kChoice, "", {}},
  };
  for (const GrammarSpec& spec : bad) {
    try {
      compiler_->compile(spec);
      ADD_FAILURE() << grammar_kind_name(spec.kind) << " '" << spec.text << "' compiled";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.message();
      EXPECT_FALSE(e.message().empty());
    }
  }
}

TEST_F(GrammarTest, CompiledGrammarsAreCachedByContent) {
  const GrammarSpec spec{Kind::kRegex, "[ab]+"};
  const auto first = compiler_->compile(spec);
  const size_t size = compiler_->cache_size();
  EXPECT_EQ(compiler_->compile(spec), first);
  EXPECT_EQ(compiler_->cache_size(), size);
  GrammarSpec loose{Kind::kJsonSchema, R"({"type":"object"})"};
  GrammarSpec strict = loose;
  loose.strict = false;
  EXPECT_NE(compiler_->compile(loose), compiler_->compile(strict));
  // Bounded: many distinct constraints never hold more than the limit.
  for (size_t i = 0; i < GrammarCompiler::kMaxCachedGrammars + 3; ++i) {
    compiler_->compile({Kind::kChoice, "", {"c" + std::to_string(i)}});
  }
  EXPECT_EQ(compiler_->cache_size(), GrammarCompiler::kMaxCachedGrammars);
}

}  // namespace
}  // namespace inflight
