#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

namespace inflight {
namespace {

// Feeds `pieces` one by one; returns the text shown and whether a stop matched.
std::pair<std::string, bool> run(StopMatcher& m, const std::vector<std::string>& pieces,
                                 bool flush_at_end = true) {
  std::string shown;
  bool matched = false;
  for (const auto& piece : pieces) {
    auto up = m.append(piece);
    shown += up.text;
    matched |= up.matched_stop.has_value();
  }
  if (flush_at_end) shown += m.flush();
  return {shown, matched};
}

TEST(StopMatcher, WithoutStopStringsEverythingPassesAtOnce) {
  StopMatcher m({}, false);
  EXPECT_EQ(m.append("Hello").text, "Hello");
  EXPECT_EQ(m.append(" world\n\n").text, " world\n\n");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, MatchAcrossTokensIsTrimmedAndNothingOfItLeaks) {
  StopMatcher m({"\n\n"}, false);
  auto up = m.append("Hello\n");
  EXPECT_EQ(up.text, "Hello") << "the newline may start the stop string: held back";
  EXPECT_FALSE(up.matched_stop);
  up = m.append("\nWorld");
  EXPECT_EQ(up.text, "");
  ASSERT_TRUE(up.matched_stop);
  EXPECT_EQ(*up.matched_stop, 0u);
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.append("more").text, "") << "nothing after a match";
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, IncludeStopStringKeepsIt) {
  StopMatcher m({"END"}, true);
  const auto [shown, matched] = run(m, {"abc E", "N", "Dxyz"});
  EXPECT_TRUE(matched);
  EXPECT_EQ(shown, "abc END");
}

TEST(StopMatcher, AFalseStartIsReleasedWhenItCannotComplete) {
  StopMatcher m({"abc"}, false);
  auto up = m.append("xa");
  EXPECT_EQ(up.text, "x");
  up = m.append("b");
  EXPECT_EQ(up.text, "");
  up = m.append("d");
  EXPECT_EQ(up.text, "abd");
  EXPECT_FALSE(up.matched_stop);
  // "aab" + "c": the match starts inside the held text, not at its first byte.
  StopMatcher m2({"abc"}, false);
  const auto [shown, matched] = run(m2, {"a", "a", "b", "c", "zz"});
  EXPECT_TRUE(matched);
  EXPECT_EQ(shown, "a");
}

TEST(StopMatcher, EarliestMatchWinsThenTheLongest) {
  StopMatcher m({"world", "lo w", "lo"}, false);
  auto [shown, matched] = run(m, {"hello world"});
  EXPECT_TRUE(matched);
  EXPECT_EQ(shown, "hel");
  StopMatcher m2({"lo", "lo w"}, true);
  std::tie(shown, matched) = run(m2, {"hel", "lo wor"});
  EXPECT_EQ(shown, "hello w");
}

TEST(StopMatcher, ByteByByteEqualsAllAtOnce) {
  const std::string text = "The quick brown fox. Jumps over. The lazy dog.";
  for (const std::string stop : {". The", "dog", "fox. J", "zzz", "The"}) {
    StopMatcher whole({stop}, false);
    const auto expected = run(whole, {text});
    StopMatcher bytes({stop}, false);
    std::vector<std::string> pieces;
    for (char c : text) pieces.emplace_back(1, c);
    EXPECT_EQ(run(bytes, pieces), expected) << stop;
  }
}

TEST(StopMatcher, FlushReturnsHeldText) {
  StopMatcher m({"</s>"}, false);
  EXPECT_EQ(m.append("done </").text, "done ");
  EXPECT_EQ(m.flush(), "</");
}

TEST(StopMatcher, MultiByteStopStringsHoldWholeCharacters) {
  StopMatcher m({"\xe3\x80\x82\xe3\x80\x82"}, false);  // "。。"
  auto up = m.append("\xe5\xa5\xbd\xe3\x80\x82");      // "好。"
  EXPECT_EQ(up.text, "\xe5\xa5\xbd");
  up = m.append("\xe3\x80\x82");
  EXPECT_TRUE(up.matched_stop);
  EXPECT_EQ(up.text, "");
}

}  // namespace
}  // namespace inflight
