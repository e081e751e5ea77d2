#include "tokenizer/chat_template/string_methods.h"

#include <gtest/gtest.h>

namespace inflight::jinja {
namespace {

using Strings = std::vector<std::string>;
const std::optional<std::string> kWhitespace;

TEST(JinjaStringMethodsTest, SplitLikePython) {
  EXPECT_EQ(str::split("a,b,,c", ",", -1), (Strings{"a", "b", "", "c"}));
  EXPECT_EQ(str::split("  a  b  ", kWhitespace, -1), (Strings{"a", "b"}));
  EXPECT_EQ(str::split("  a  b  c ", kWhitespace, 1), (Strings{"a", "b  c "}));
  EXPECT_EQ(str::split("", kWhitespace, -1), Strings{});
  EXPECT_EQ(str::split("", ",", -1), Strings{""});
  EXPECT_EQ(str::split("a b c", " ", 1), (Strings{"a", "b c"}));
  EXPECT_EQ(str::rsplit("a,b,c", ",", 1), (Strings{"a,b", "c"}));
  EXPECT_EQ(str::rsplit("  a  b  c ", kWhitespace, 1), (Strings{"  a  b", "c"}));
  // U+3000 (ideographic space) is whitespace for Python.
  EXPECT_EQ(str::split("x\xE3\x80\x80y", kWhitespace, -1), (Strings{"x", "y"}));
  EXPECT_EQ(str::splitlines("a\nb\r\nc\rd\n", false), (Strings{"a", "b", "c", "d"}));
  EXPECT_EQ(str::splitlines("a\n\nb", true), (Strings{"a\n", "\n", "b"}));
}

TEST(JinjaStringMethodsTest, StripReplaceFindCount) {
  EXPECT_EQ(str::strip(" \t x y \n", kWhitespace, true, true), "x y");
  EXPECT_EQ(str::strip("xxhixx", "x", true, false), "hixx");
  EXPECT_EQ(str::strip("\xC2\xA0"
                       "a\xC2\xA0",
                       kWhitespace, true, true),
            "a");  // U+00A0
  EXPECT_EQ(str::strip("\xC3\xA9"
                       "a\xC3\xA9",
                       "\xC3\xA9", true, true),
            "a");
  EXPECT_EQ(str::replace("aaa", "a", "b", 2), "bba");
  EXPECT_EQ(str::replace("ab", "", "-", -1), "-a-b-");
  EXPECT_EQ(str::find("h\xC3\xA9llo", "l", 0, 100, false), 2);  // code point index
  EXPECT_EQ(str::find("hello", "l", 0, 100, true), 3);
  EXPECT_EQ(str::find("hello", "l", -2, 100, false), 3);
  EXPECT_EQ(str::find("hello", "z", 0, 100, false), -1);
  EXPECT_EQ(str::find("abc", "", 5, 100, false), -1);
  EXPECT_EQ(str::count("aaaa", "aa", 0, 100), 2);
  EXPECT_EQ(str::count("abc", "", 0, 100), 4);
  EXPECT_EQ(str::pad("ab", 5, "*", '^'), "**ab*");  // CPython puts the odd pad left
  EXPECT_EQ(str::pad("a", 4, " ", '^'), " a  ");
  EXPECT_EQ(str::pad("ab", 4, "-", '>'), "--ab");
}

}  // namespace
}  // namespace inflight::jinja
