#include "tokenizer/chat_template/unicode.h"

#include <gtest/gtest.h>

namespace inflight::jinja {
namespace {

TEST(JinjaUnicodeTest, Utf8Validation) {
  EXPECT_TRUE(unicode::is_valid_utf8("plain \xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80"));
  EXPECT_FALSE(unicode::is_valid_utf8("\xC3"));              // truncated
  EXPECT_FALSE(unicode::is_valid_utf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(unicode::is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(unicode::is_valid_utf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(unicode::is_valid_utf8("\xFF"));
  EXPECT_EQ(unicode::length("h\xC3\xA9llo \xF0\x9F\x98\x80"), 7u);
  EXPECT_EQ(unicode::byte_offset("h\xC3\xA9llo", 2), 3u);
}

TEST(JinjaUnicodeTest, CaseMappingFollowsPython) {
  EXPECT_EQ(unicode::upper("stra\xC3\x9F"
                           "e \xC3\xA9t\xC3\xA9"),
            "STRASSE \xC3\x89T\xC3\x89");  // ß -> SS
  EXPECT_EQ(unicode::lower("\xC3\x80\xC3\x89\xC3\x8E \xCE\xA9"),
            "\xC3\xA0\xC3\xA9\xC3\xAE \xCF\x89");
  EXPECT_EQ(unicode::title("hello wORLD o'neil 3rd"), "Hello World O'Neil 3Rd");
  EXPECT_EQ(unicode::capitalize("hELLO World"), "Hello world");
  EXPECT_EQ(unicode::capitalize("\xC7\x86"
                                "emal"),
            "\xC7\x85"
            "emal");  // ǆ -> ǅ (title case)
}

TEST(JinjaUnicodeTest, Properties) {
  for (char32_t cp : {U' ', U'\t', U'\n', U'\x1c', U'\u00a0', U'\u2028', U'\u3000'}) {
    EXPECT_TRUE(unicode::is_space(cp)) << static_cast<int>(cp);
  }
  EXPECT_FALSE(unicode::is_space(U'\u200b'));  // zero-width space is not whitespace
  EXPECT_TRUE(unicode::is_printable(U'\u00e9'));
  EXPECT_FALSE(unicode::is_printable(U'\u00a0'));
  EXPECT_FALSE(unicode::is_printable(U'\u200b'));
  EXPECT_TRUE(unicode::is_cased(U'\u00e9'));
  EXPECT_FALSE(unicode::is_cased(U'\u4e2d'));
}

}  // namespace
}  // namespace inflight::jinja
