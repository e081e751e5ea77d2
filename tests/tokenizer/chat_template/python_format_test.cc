#include "tokenizer/chat_template/python_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tokenizer/chat_template/render_error.h"

namespace inflight::jinja {
namespace {

TEST(JinjaPythonFormatTest, FloatReprIsShortestRoundTrip) {
  // Expected strings are Python 3's repr().
  EXPECT_EQ(format_float(1.0), "1.0");
  EXPECT_EQ(format_float(0.1), "0.1");
  EXPECT_EQ(format_float(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(format_float(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(format_float(100.0), "100.0");
  EXPECT_EQ(format_float(1e15), "1000000000000000.0");
  EXPECT_EQ(format_float(1e16), "1e+16");
  EXPECT_EQ(format_float(1.5e-5), "1.5e-05");
  EXPECT_EQ(format_float(0.0001), "0.0001");
  EXPECT_EQ(format_float(123456789.123), "123456789.123");
  EXPECT_EQ(format_float(-2.5), "-2.5");
  EXPECT_EQ(format_float(-0.0), "-0.0");
  EXPECT_EQ(format_float(1e300 * 1e10), "inf");
  EXPECT_EQ(format_float(std::nan("")), "nan");
  EXPECT_EQ(format_float(5e-324), "5e-324");
  EXPECT_EQ(format_float(std::numeric_limits<double>::max()), "1.7976931348623157e+308");
}

TEST(JinjaPythonFormatTest, StrAndReprOfContainers) {
  ValueMap m;
  m.set(Value("k"),
        Value::list({Value(1), Value("it's"), Value(nullptr), Value(true), Value(1.5)}));
  m.set(Value(2), Value::tuple({Value("x")}));
  EXPECT_EQ(to_str(Value::dict(m)), R"({'k': [1, "it's", None, True, 1.5], 2: ('x',)})");
  EXPECT_EQ(to_str(Value("plain")), "plain");
  EXPECT_EQ(to_str(Value()), "");
  EXPECT_EQ(to_str(Value::tuple({})), "()");
  EXPECT_EQ(to_repr(Value("both ' \" \\ \n \t")), R"('both \' " \\ \n \t')");
  // Non-printable code points are escaped, printable non-ASCII is kept.
  EXPECT_EQ(to_repr(Value("\xC3\xA9 \x01 \x7F \xC2\xA0 \xE2\x80\xA8 \xF0\x9F\x98\x80")),
            "'\xC3\xA9 \\x01 \\x7f \\xa0 \\u2028 \xF0\x9F\x98\x80'");
}

TEST(JinjaPythonFormatTest, JsonMatchesJsonDumps) {
  ValueMap inner;
  inner.set(Value("z"), Value(nullptr));
  ValueMap m;
  m.set(Value("b"), Value::list({Value(1), Value(2.0), Value::dict(inner)}));
  m.set(Value("a"), Value("\xC3\xA9\"\n\x01"));
  m.set(Value(3), Value(false));
  const Value v = Value::dict(m);
  EXPECT_EQ(to_json(v), R"({"b": [1, 2.0, {"z": null}], "a": "é\"\n\u0001", "3": false})");
  JsonOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(to_json(Value("\xC3\xA9\xF0\x9F\x98\x80"), ascii), R"("\u00e9\ud83d\ude00")");
  JsonOptions indented;
  indented.indent = "  ";
  EXPECT_EQ(to_json(v, indented),
            "{\n  \"b\": [\n    1,\n    2.0,\n    {\n      \"z\": null\n    }\n  ],\n"
            "  \"a\": \"\xC3\xA9\\\"\\n\\u0001\",\n  \"3\": false\n}");
  JsonOptions compact;
  compact.item_separator = ",";
  compact.key_separator = ":";
  compact.sort_keys = true;
  ValueMap s;
  s.set(Value("b"), Value(1));
  s.set(Value("a"), Value::list({}));
  EXPECT_EQ(to_json(Value::dict(s), compact), R"({"a":[],"b":1})");
  EXPECT_EQ(to_json(Value(std::numeric_limits<double>::infinity())), "Infinity");
}

TEST(JinjaPythonFormatTest, JsonRejectsWhatPythonRejects) {
  EXPECT_THROW(to_json(Value()), RenderError);
  EXPECT_THROW(to_json(Value::iterator("generator", {})), RenderError);
  EXPECT_THROW(to_json(Value::new_namespace({})), RenderError);
}

}  // namespace
}  // namespace inflight::jinja
