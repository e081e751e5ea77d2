#include "bench/datasets.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include "bench/input_file.h"
#include "bench/token_codec.h"
#include "core/check.h"
#include "test_data.h"

namespace inflight::bench {
namespace {

// Greedy longest-match over a few pieces, so that decode -> encode is not the identity:
// decode([a, b]) = "ab", which encodes back as the single token "ab".
class ToyCodec final : public TokenCodec {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    size_t i = 0;
    while (i < text.size()) {
      int32_t best = -1;
      for (int32_t id = 0; id < vocab_size(); ++id) {
        const std::string& p = kPieces[id];
        if (text.substr(i, p.size()) == p && (best < 0 || p.size() > kPieces[best].size()))
          best = id;
      }
      if (best < 0) {
        ++i;  // unknown bytes are dropped
        continue;
      }
      ids.push_back(best);
      i += kPieces[best].size();
    }
    return ids;
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    for (int32_t id : ids) {
      if (is_ordinary(id)) out += kPieces[id];
    }
    return out;
  }
  int32_t vocab_size() const override { return static_cast<int32_t>(std::size(kPieces)); }
  bool is_ordinary(int32_t id) const override { return id != kSpecial; }
  std::string description() const override { return "toy"; }

  static constexpr int32_t kSpecial = 4;
  static inline const std::string kPieces[] = {"a", "b", "ab", " c", "<s>", "d"};
};

TEST(RandomDataset, PromptsHaveExactlyTheAskedLength) {
  const ToyCodec codec;
  RandomDatasetOptions o;
  o.num_prompts = 50;
  o.input_len = 40;
  o.output_len = 16;
  o.range_ratio = 0.25;
  o.seed = 3;
  const auto set = random_dataset(o, codec);
  ASSERT_EQ(set.size(), 50u);
  std::set<int32_t> lengths;
  for (const auto& r : set) {
    EXPECT_EQ(static_cast<int32_t>(codec.encode(r.prompt).size()), r.prompt_len);
    EXPECT_GE(r.prompt_len, 30);
    EXPECT_LE(r.prompt_len, 50);
    EXPECT_GE(r.output_len, 12);
    EXPECT_LE(r.output_len, 20);
    EXPECT_EQ(r.prompt.find("<s>"), std::string::npos);
    lengths.insert(r.prompt_len);
  }
  EXPECT_GT(lengths.size(), 5u);
  const auto again = random_dataset(o, codec);
  for (size_t i = 0; i < set.size(); ++i) EXPECT_EQ(set[i].prompt, again[i].prompt);
}

TEST(RandomDataset, SharedPrefix) {
  const ToyCodec codec;
  RandomDatasetOptions o;
  o.num_prompts = 10;
  o.input_len = 8;
  o.prefix_len = 32;
  const auto set = random_dataset(o, codec);
  // Re-tokenizing may merge across the seam; the text well before it is shared.
  const std::vector<int32_t> first = codec.encode(set[0].prompt);
  const std::string head = codec.decode(std::span(first).first(24));
  for (const auto& r : set) {
    EXPECT_EQ(r.prompt_len, 40);
    EXPECT_EQ(r.prompt.substr(0, head.size()), head);
  }
}

TEST(RandomDataset, RejectsBadOptions) {
  const ToyCodec codec;
  RandomDatasetOptions o;
  o.range_ratio = 1.0;
  EXPECT_THROW(random_dataset(o, codec), Error);
  o.range_ratio = 0.0;
  o.input_len = 0;
  EXPECT_THROW(random_dataset(o, codec), Error);
}

constexpr const char* kShareGpt = R"([
  {"id": "1", "conversations": [{"from": "human", "value": "a b a b a b"},
                                {"from": "gpt", "value": "d d d d d d d"}]},
  {"id": "2", "conversations": [{"from": "system", "value": "ignored"},
                                {"from": "human", "value": "ab ab d d"}]},
  {"id": "3", "conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "dddd"}]},
  {"id": "4", "conversations": []},
  {"id": "5"}
])";

TEST(PromptsDataset, ParsesFirstHumanTurnAndReply) {
  const auto conversations = parse_sharegpt(kShareGpt);
  ASSERT_EQ(conversations.size(), 3u);
  EXPECT_EQ(conversations[0].prompt, "a b a b a b");
  EXPECT_EQ(*conversations[0].reply, "d d d d d d d");
  EXPECT_EQ(conversations[1].prompt, "ab ab d d");
  EXPECT_FALSE(conversations[1].reply.has_value());
  EXPECT_THROW(parse_sharegpt("{\"not\": \"an array\"}"), Error);
}

TEST(PromptsDataset, LengthsFromReplyOrDrawnAndShortOnesSkipped) {
  const ToyCodec codec;
  const auto conversations = parse_sharegpt(kShareGpt);
  PromptsDatasetOptions o;
  o.num_prompts = 6;
  o.seed = 1;
  const auto set = prompts_dataset(conversations, o, codec);
  ASSERT_EQ(set.size(), 6u);  // two valid conversations, repeated
  for (const auto& r : set) {
    EXPECT_NE(r.prompt, "a");  // one prompt token: skipped
    if (r.prompt == "a b a b a b") {
      EXPECT_EQ(r.prompt_len, 6);
      EXPECT_EQ(r.output_len, 7);  // the reply's tokens
    } else {
      EXPECT_EQ(r.prompt, "ab ab d d");
      EXPECT_GE(r.output_len, 4);  // drawn: log-normal, clipped to [4, 1024]
      EXPECT_LE(r.output_len, 1024);
    }
  }
  o.fixed_output_len = 2;
  for (const auto& r : prompts_dataset(conversations, o, codec)) EXPECT_EQ(r.output_len, 2);
}

TEST(InputFile, ReadsPlainAndXzFiles) {
  const auto dir = inflight::testing::scratch_dir("bench_input_file");
  const std::string plain = (dir / "p.json").string();
  std::ofstream(plain) << "[1, 2, 3]";
  EXPECT_EQ(read_input_file(plain), "[1, 2, 3]");
  if (std::system(("xz -k " + plain + " 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "skipped: xz not installed";
  }
  EXPECT_EQ(read_input_file(plain + ".xz"), "[1, 2, 3]");
  EXPECT_THROW(read_input_file((dir / "missing.json").string()), Error);
}

// The real tokenizer and the real prompts file (skip without them).
TEST(DatasetsOnRealData, DefaultModelTokenizerAndPromptsFile) {
  INFLIGHT_REQUIRE_MODEL(model);
  std::unique_ptr<TokenCodec> codec;
  try {
    codec = load_token_codec(model);
  } catch (const Error& e) {
    GTEST_SKIP() << "skipped: " << e.what();
  }
  RandomDatasetOptions o;
  o.num_prompts = 8;
  o.input_len = 64;
  o.output_len = 8;
  o.prefix_len = 16;
  for (const auto& r : random_dataset(o, *codec)) {
    EXPECT_EQ(r.prompt_len, 80);
    EXPECT_EQ(static_cast<int32_t>(codec->encode(r.prompt).size()), 80);
  }
  INFLIGHT_REQUIRE_DATA(prompts, "prompts/prompts_sharegpt_like.json.xz");
  const auto conversations = parse_sharegpt(read_input_file(prompts));
  EXPECT_EQ(conversations.size(), 21876u);
  PromptsDatasetOptions po;
  po.num_prompts = 20;
  const auto set = prompts_dataset(conversations, po, *codec);
  ASSERT_EQ(set.size(), 20u);
  for (const auto& r : set) {
    EXPECT_GE(r.prompt_len, 4);
    EXPECT_LE(r.prompt_len + r.output_len, 2048);
  }
}

}  // namespace
}  // namespace inflight::bench
