#include "tokenizer/chat_template/lexer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/check.h"

namespace inflight::jinja {
namespace {

// Token stream as "type:text" strings, for compact expectations.
std::vector<std::string> lex(const std::string& source) {
  std::vector<std::string> out;
  for (const Token& t : tokenize(source)) {
    switch (t.type) {
      case TokenType::kData:
        out.push_back("data:" + t.text);
        break;
      case TokenType::kVariableBegin:
        out.push_back("{{");
        break;
      case TokenType::kVariableEnd:
        out.push_back("}}");
        break;
      case TokenType::kBlockBegin:
        out.push_back("{%");
        break;
      case TokenType::kBlockEnd:
        out.push_back("%}");
        break;
      case TokenType::kName:
        out.push_back("name:" + t.text);
        break;
      case TokenType::kString:
        out.push_back("str:" + t.text);
        break;
      case TokenType::kInteger:
        out.push_back("int:" + std::to_string(t.int_value));
        break;
      case TokenType::kFloat:
        out.push_back("float:" + t.text);
        break;
      case TokenType::kOperator:
        out.push_back("op:" + t.text);
        break;
      case TokenType::kEof:
        out.push_back("eof");
        break;
    }
  }
  return out;
}

using V = std::vector<std::string>;

TEST(JinjaLexerTest, TagsAndExpressions) {
  EXPECT_EQ(lex("a{{ x.y[0] | f(1, 'q') }}b"),
            (V{"data:a", "{{", "name:x", "op:.", "name:y", "op:[", "int:0", "op:]", "op:|",
               "name:f", "op:(", "int:1", "op:,", "str:q", "op:)", "}}", "data:b", "eof"}));
  EXPECT_EQ(lex("{% if a != b and c // 2 ** 3 %}"),
            (V{"{%", "name:if", "name:a", "op:!=", "name:b", "name:and", "name:c", "op://", "int:2",
               "op:**", "int:3", "%}", "eof"}));
}

TEST(JinjaLexerTest, Numbers) {
  EXPECT_EQ(lex("{{ 0x1F 0o17 0b101 1_000 0 }}"),
            (V{"{{", "int:31", "int:15", "int:5", "int:1000", "int:0", "}}", "eof"}));
  EXPECT_EQ(lex("{{ 1.5 1e3 2.5E-2 }}"),
            (V{"{{", "float:1.5", "float:1e3", "float:2.5E-2", "}}", "eof"}));
  // After a dot a number is an item index, not a float: x.0.1 is x[0][1].
  EXPECT_EQ(lex("{{ x.0 }}"), (V{"{{", "name:x", "op:.", "int:0", "}}", "eof"}));
}

TEST(JinjaLexerTest, StringEscapesFollowPython) {
  EXPECT_EQ(lex(R"({{ 'a\nb\t\'\x41\u00e9\U0001F600\101\q' "d\"q" }})"),
            (V{"{{",
               "str:a\nb\t'A\xC3\xA9\xF0\x9F\x98\x80"
               "A\\q",
               "str:d\"q", "}}", "eof"}));
}

TEST(JinjaLexerTest, WhitespaceControlSigns) {
  EXPECT_EQ(lex("a  {{- 1 -}}  b"), (V{"data:a", "{{", "int:1", "}}", "data:b", "eof"}));
  EXPECT_EQ(lex("a \n {%- if x -%} \n b"),
            (V{"data:a", "{%", "name:if", "name:x", "%}", "data:b", "eof"}));
  EXPECT_EQ(lex("x {#- c -#} y"), (V{"data:x", "data:y", "eof"}));
}

TEST(JinjaLexerTest, TrimBlocksAndLstripBlocks) {
  // lstrip_blocks: indentation before {% on its own line goes; trim_blocks: the newline after %}.
  EXPECT_EQ(lex("a\n  {% if x %}\n  b\n  {% endif %}\nc"),
            (V{"data:a\n", "{%", "name:if", "name:x", "%}", "data:  b\n", "{%", "name:endif", "%}",
               "data:c", "eof"}));
  // Not for {{ }}: only block and comment tags.
  EXPECT_EQ(lex("a\n  {{ x }}\nb"), (V{"data:a\n  ", "{{", "name:x", "}}", "data:\nb", "eof"}));
  // {%+ keeps the indentation, +%} keeps the newline.
  EXPECT_EQ(lex("a\n  {%+ if x +%}\nb"),
            (V{"data:a\n  ", "{%", "name:if", "name:x", "%}", "data:\nb", "eof"}));
  // Text before the tag on the same line is not stripped.
  EXPECT_EQ(lex("a  {% if x %}"), (V{"data:a  ", "{%", "name:if", "name:x", "%}", "eof"}));
  // At the start of the template a line starts too.
  EXPECT_EQ(lex("  {% if x %}"), (V{"{%", "name:if", "name:x", "%}", "eof"}));
}

TEST(JinjaLexerTest, NewlinesAreNormalisedAndOneTrailingNewlineDropped) {
  EXPECT_EQ(lex("a\r\nb\rc\n"), (V{"data:a\nb\nc", "eof"}));
  EXPECT_EQ(lex("a\n\n"), (V{"data:a\n", "eof"}));
}

TEST(JinjaLexerTest, CommentsAndRawBlocks) {
  EXPECT_EQ(lex("a{# {{ not }} #}b"), (V{"data:a", "data:b", "eof"}));
  EXPECT_EQ(lex("{% raw %}{{ x }}{% endraw %}"), (V{"data:{{ x }}", "eof"}));
  EXPECT_EQ(lex("{% raw -%}  {{ x }}  {%- endraw %}"), (V{"data:{{ x }}", "eof"}));
}

TEST(JinjaLexerTest, BracesInsideExpressionsDoNotEndTheTag) {
  EXPECT_EQ(lex("{{ {'a': {'b': 1}} }}"), (V{"{{", "op:{", "str:a", "op::", "op:{", "str:b",
                                             "op::", "int:1", "op:}", "op:}", "}}", "eof"}));
}

TEST(JinjaLexerTest, LineNumbers) {
  const auto tokens = tokenize("line1\n{{ a }}\n\n{% if\nb %}");
  EXPECT_EQ(tokens[1].line, 2);  // {{
  EXPECT_EQ(tokens[2].line, 2);  // a
  EXPECT_EQ(tokens[5].line, 4);  // {%
  EXPECT_EQ(tokens[7].line, 5);  // b
}

void expect_syntax_error(const std::string& source, const std::string& fragment) {
  try {
    tokenize(source);
    FAIL() << "no error for: " << source;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidFile);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(JinjaLexerTest, MalformedInputNamesTheLine) {
  expect_syntax_error("a\n{{ 'unterminated }}", "line 2: unterminated string");
  expect_syntax_error("{# never closed", "line 1: missing end of comment");
  expect_syntax_error("\n\n{{ x ", "line 3: unexpected end of template");
  expect_syntax_error("{{ (1] }}", "unexpected ']', expected ')'");
  expect_syntax_error("{{ a ) }}", "unexpected ')'");
  expect_syntax_error("{{ a $ b }}", "unexpected character '$'");
  expect_syntax_error("{% raw %} no end", "missing end of raw directive");
  expect_syntax_error(std::string("bad \xC3\x28 utf8"), "not valid UTF-8");
}

}  // namespace
}  // namespace inflight::jinja
