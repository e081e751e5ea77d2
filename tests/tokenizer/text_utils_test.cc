// UTF-8 repair, GPT-2 byte map, NFC and the Split behaviours: the building blocks.
#include <gtest/gtest.h>

#include <random>

#include "core/check.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex_split.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"

namespace inflight {
namespace {

std::string repaired(std::string_view s) {
  std::string out;
  utf8::repair(s, out, true);
  return out;
}

TEST(Utf8, RepairReplacesEachMaximalSubpart) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(repaired("abc"), "abc");
  EXPECT_EQ(repaired("a\xFF"
                     "b"),
            "a" + r + "b");
  EXPECT_EQ(repaired("\xE2\x82"), r);  // truncated 3-byte: one U+FFFD
  EXPECT_EQ(repaired("\xE2\x82"
                     "A"),
            r + "A");                                      // interrupted: one U+FFFD
  EXPECT_EQ(repaired("\xC0\xAF"), r + r);                  // overlong lead is invalid on its own
  EXPECT_EQ(repaired("\xED\xA0\x80"), r + r + r);          // surrogate: ED then two strays
  EXPECT_EQ(repaired("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(repaired("\xF0\x9F\xA6\x99"), "\xF0\x9F\xA6\x99");  // 🦙 stays
  EXPECT_TRUE(utf8::is_valid("\xF0\x9F\xA6\x99 \xC3\xA9"));
  EXPECT_FALSE(utf8::is_valid("\xF0\x9F\xA6"));
}

TEST(Utf8, StreamingRepairEqualsWholeRepairOnRandomBytes) {
  std::mt19937 rng(7);
  const std::string alphabet[] = {"a",    " ",    "\xC3", "\xA9", "\xE2", "\x82", "\xAC", "\xF0",
                                  "\x9F", "\xA6", "\x99", "\xFF", "\xED", "\xA0", "\x80"};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string s;
    const int n = rng() % 24;
    for (int i = 0; i < n; ++i) s += alphabet[rng() % std::size(alphabet)];
    // Feed in random chunks, holding back the incomplete tail each time.
    std::string pending, streamed;
    size_t pos = 0;
    while (pos < s.size()) {
      const size_t take = 1 + rng() % 4;
      pending += s.substr(pos, take);
      pos += take;
      std::string out;
      pending.erase(0, utf8::repair(pending, out, false));
      ASSERT_TRUE(utf8::is_valid(out));
      streamed += out;
    }
    std::string out;
    utf8::repair(pending, out, true);
    streamed += out;
    ASSERT_EQ(streamed, repaired(s)) << "trial " << trial;
  }
}

TEST(ByteLevel, RoundTripsAllBytes) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string spelled = byte_level::encode(all);
  EXPECT_EQ(byte_level::encode(" "), "\xC4\xA0");   // 'Ġ'
  EXPECT_EQ(byte_level::encode("\n"), "\xC4\x8A");  // 'Ċ'
  EXPECT_EQ(byte_level::decode(spelled), all);
  EXPECT_FALSE(byte_level::decode("\xE2\x96\x81").has_value());  // '▁' is not a byte
}

TEST(Nfc, ComposesReordersAndKeepsNfcText) {
  EXPECT_EQ(unicode::nfc("e\xCC\x81"), "\xC3\xA9");     // e + U+0301 -> é
  EXPECT_EQ(unicode::nfc("\xE2\x84\xAB"), "\xC3\x85");  // Å (U+212B) -> U+00C5
  EXPECT_EQ(unicode::nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo -> 각
  // a + dot below (220) + circumflex (230), given in the wrong order: ậ
  EXPECT_EQ(unicode::nfc("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD");
  EXPECT_EQ(unicode::nfc("\xE0\xA4\x95\xE0\xA4\xBC"), "\xE0\xA4\x95\xE0\xA4\xBC");  // excluded
  EXPECT_TRUE(unicode::is_nfc_quick("plain ASCII and caf\xC3\xA9"));
  EXPECT_FALSE(unicode::is_nfc_quick("e\xCC\x81"));
  const std::string mixed = "A\xCC\x8A\xE1\x84\x80\xE1\x85\xA1 e\xCC\x81\xCC\xA3 \xF0\x9F\xA6\x99";
  EXPECT_EQ(unicode::nfc(unicode::nfc(mixed)), unicode::nfc(mixed));
}

std::vector<std::string> split_on_dash(SplitBehavior b, bool invert = false) {
  const Regex dash("-");
  std::vector<std::string_view> out;
  split_by_regex(dash, "the-final--countdown", b, invert, out);
  return {out.begin(), out.end()};
}

TEST(Split, BehavioursMatchHuggingFace) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split_on_dash(SplitBehavior::kRemoved), (V{"the", "final", "countdown"}));
  EXPECT_EQ(split_on_dash(SplitBehavior::kIsolated),
            (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split_on_dash(SplitBehavior::kMergedWithPrevious),
            (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split_on_dash(SplitBehavior::kMergedWithNext), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split_on_dash(SplitBehavior::kContiguous), (V{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(split_on_dash(SplitBehavior::kRemoved, true), (V{"-", "-", "-"}));
}

TEST(Split, RegexUsesUnicodePropertiesAndPieceLocalAnchors) {
  const Regex words(R"(\p{L}+|\s+$)");
  std::vector<std::pair<size_t, size_t>> spans;
  words.find_all("Привет мир  ", spans);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0], (std::pair<size_t, size_t>{0, 12}));   // Cyrillic letters, 2 bytes each
  EXPECT_EQ(spans[2], (std::pair<size_t, size_t>{19, 21}));  // trailing spaces only
  EXPECT_THROW(Regex("(unclosed"), Error);
}

}  // namespace
}  // namespace inflight
