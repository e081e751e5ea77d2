// Lexer: template source -> tokens, with jinja2's whitespace rules as transformers configures
// them (trim_blocks, lstrip_blocks, no keep_trailing_newline):
//   - "\r\n" and "\r" become "\n"; one trailing newline of the source is dropped;
//   - `{%-`, `{{-`, `{#-` strip all whitespace before the tag, `-%}`, `-}}`, `-#}` after it;
//   - lstrip_blocks: spaces and tabs from the start of a line up to `{%` or `{#` are dropped
//     (`{%+` keeps them); trim_blocks: the newline right after `%}` or `#}` is dropped (`+%}`
//     keeps it);
//   - comments vanish; {% raw %}...{% endraw %} becomes one data token.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace inflight::jinja {

enum class TokenType {
  kData,           // template text, printed as is
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,           // identifier or keyword (if, for, in, not, true, ...)
  kString,         // text = the unescaped value
  kInteger,
  kFloat,
  kOperator,  // text = "+", "//", "==", "(", ...
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;
  std::int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;
};

// Throws Error(kInvalidFile) naming the line for malformed input (unterminated string, comment
// or tag, unbalanced brackets, unexpected character). The last token is kEof.
std::vector<Token> tokenize(std::string_view source);

}  // namespace inflight::jinja
