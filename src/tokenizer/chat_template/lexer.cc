#include "tokenizer/chat_template/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "core/check.h"
#include "tokenizer/chat_template/unicode.h"

namespace inflight::jinja {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

// Python's "\s" (str.isspace) at s[i]; its byte length or 0.
std::size_t space_at(std::string_view s, std::size_t i) {
  std::size_t j = i;
  return unicode::is_space(unicode::decode(s, j)) ? j - i : 0;
}

std::size_t skip_spaces(std::string_view s, std::size_t i) {
  while (i < s.size()) {
    const std::size_t n = space_at(s, i);
    if (n == 0) break;
    i += n;
  }
  return i;
}

// Python str.rstrip() with no argument.
std::string_view rstrip(std::string_view s) {
  std::size_t end = s.size();
  while (end > 0) {
    std::size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    if (space_at(s, start) == 0) break;
    end = start;
  }
  return s.substr(0, end);
}

bool all_spaces(std::string_view s) {
  return !s.empty() && skip_spaces(s, 0) == s.size();
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    for (std::size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    std::size_t pos = 0;
    while (pos < src_.size()) pos = lex_root(pos);
    push(TokenType::kEof, src_.size());
    return std::move(tokens_);
  }

 private:
  int line_at(std::size_t pos) const {
    return static_cast<int>(std::upper_bound(line_starts_.begin(), line_starts_.end(), pos) -
                            line_starts_.begin()) +
           1;
  }

  [[noreturn]] void fail(std::size_t pos, const std::string& what) const {
    INFLIGHT_THROW(ErrorCode::kInvalidFile, "chat template syntax error at line {}: {}",
                   line_at(pos), what);
  }

  Token& push(TokenType type, std::size_t pos, std::string text = {}) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.line = line_at(pos);
    tokens_.push_back(std::move(t));
    return tokens_.back();
  }

  // Text before a tag, with the tag's whitespace control applied. `sign` is '-', '+' or 0.
  void emit_text(std::size_t begin, std::size_t end, char sign, bool lstrip_applies) {
    std::string_view text(src_.data() + begin, end - begin);
    if (sign == '-') {
      text = rstrip(text);
    } else if (sign != '+' && lstrip_applies) {
      const std::size_t nl = text.rfind('\n');
      const std::size_t line_begin = nl == std::string_view::npos ? 0 : nl + 1;
      if ((line_begin > 0 || line_starting_) && all_spaces(text.substr(line_begin))) {
        text = text.substr(0, line_begin);
      }
    }
    if (!text.empty()) push(TokenType::kData, begin, std::string(text));
  }

  // Matches a block end ("+%}", "-%}" + spaces, "%}" + optional newline) at pos.
  std::size_t match_end(std::size_t pos, char a, char b, bool trim_newline) const {
    auto at = [&](std::size_t i, char c) { return i < src_.size() && src_[i] == c; };
    if (at(pos, '+') && at(pos + 1, a) && at(pos + 2, b)) return pos + 3;
    if (at(pos, '-') && at(pos + 1, a) && at(pos + 2, b)) return skip_spaces(src_, pos + 3);
    if (at(pos, a) && at(pos + 1, b))
      return pos + 2 + ((trim_newline && at(pos + 2, '\n')) ? 1 : 0);
    return std::string::npos;
  }

  void set_line_starting(std::size_t end) { line_starting_ = end > 0 && src_[end - 1] == '\n'; }

  // `{% raw %}` (with optional signs) at pos: returns the end of the opening tag or npos.
  std::size_t match_raw_begin(std::size_t pos) const {
    std::size_t i = pos + 2;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    i = skip_spaces(src_, i);
    if (src_.compare(i, 3, "raw") != 0) return std::string::npos;
    i = skip_spaces(src_, i + 3);
    if (src_.compare(i, 3, "-%}") == 0) return skip_spaces(src_, i + 3);
    if (src_.compare(i, 2, "%}") == 0) return i + 2;
    return std::string::npos;
  }

  std::size_t lex_root(std::size_t pos) {
    std::size_t p = pos;
    while (true) {
      p = src_.find('{', p);
      if (p == std::string::npos || p + 1 >= src_.size()) {
        emit_text(pos, src_.size(), 0, false);
        return src_.size();
      }
      const char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++p;
    }
    const char kind = src_[p + 1];
    const char sign =
        (p + 2 < src_.size() && (src_[p + 2] == '-' || src_[p + 2] == '+')) ? src_[p + 2] : 0;
    emit_text(pos, p, sign, kind != '{');
    line_starting_ = false;
    if (kind == '%') {
      const std::size_t raw_end = match_raw_begin(p);
      if (raw_end != std::string::npos) {
        set_line_starting(raw_end);
        return lex_raw(p, raw_end);
      }
    }
    const std::size_t body = p + 2 + (sign != 0 ? 1 : 0);
    if (kind == '#') return lex_comment(p, body);
    return lex_tag(p, body, kind == '%');
  }

  std::size_t lex_comment(std::size_t start, std::size_t pos) {
    for (std::size_t q = pos; q < src_.size(); ++q) {
      const std::size_t end = match_end(q, '#', '}', true);
      if (end != std::string::npos) {
        set_line_starting(end);
        return end;
      }
    }
    fail(start, "missing end of comment tag");
  }

  std::size_t lex_raw(std::size_t start, std::size_t pos) {
    for (std::size_t q = src_.find("{%", pos); q != std::string::npos; q = src_.find("{%", q + 1)) {
      std::size_t i = q + 2;
      const char sign = (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ? src_[i] : 0;
      if (sign != 0) ++i;
      i = skip_spaces(src_, i);
      if (src_.compare(i, 6, "endraw") != 0) continue;
      const std::size_t end = match_end(skip_spaces(src_, i + 6), '%', '}', true);
      if (end == std::string::npos) continue;
      emit_text(pos, q, sign, true);
      set_line_starting(end);
      return end;
    }
    fail(start, "missing end of raw directive");
  }

  std::size_t lex_tag(std::size_t start, std::size_t pos, bool block) {
    push(block ? TokenType::kBlockBegin : TokenType::kVariableBegin, start);
    std::string balance;  // expected closing brackets
    while (true) {
      if (balance.empty()) {
        const std::size_t end =
            block ? match_end(pos, '%', '}', true) : match_end(pos, '}', '}', false);
        // "+}}" is not a variable end: `{{ a +}}` is an error in jinja2 as well.
        if (end != std::string::npos && !(!block && src_[pos] == '+')) {
          push(block ? TokenType::kBlockEnd : TokenType::kVariableEnd, pos);
          set_line_starting(end);
          return end;
        }
      }
      if (pos >= src_.size()) {
        fail(start, block ? "unexpected end of template inside a {% %} tag"
                          : "unexpected end of template inside a {{ }} expression");
      }
      if (const std::size_t n = space_at(src_, pos); n > 0) {
        pos += n;
        continue;
      }
      pos = lex_token(pos, balance);
    }
  }

  std::size_t lex_token(std::size_t pos, std::string& balance) {
    const char c = src_[pos];
    if (is_digit(c)) return lex_number(pos);
    if (is_name_start(c)) {
      std::size_t end = pos;
      while (end < src_.size() && is_name_char(src_[end])) ++end;
      push(TokenType::kName, pos, src_.substr(pos, end - pos));
      return end;
    }
    if (c == '\'' || c == '"') return lex_string(pos);
    static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwoChar) {
      if (src_.compare(pos, 2, op) == 0) {
        push(TokenType::kOperator, pos, std::string(op));
        return pos + 2;
      }
    }
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      fail(pos, "unexpected character '" + std::string(1, c) + "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(pos, std::string("unexpected '") + c + "'");
      if (balance.back() != c) {
        fail(pos, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      }
      balance.pop_back();
    }
    push(TokenType::kOperator, pos, std::string(1, c));
    return pos + 1;
  }

  // (\d+_)*\d+ at i: end of the digit run, or i if none.
  std::size_t digits(std::size_t i) const {
    std::size_t j = i;
    while (j < src_.size() && is_digit(src_[j])) {
      while (j < src_.size() && is_digit(src_[j])) ++j;
      if (j + 1 < src_.size() && src_[j] == '_' && is_digit(src_[j + 1])) ++j;
    }
    return j;
  }

  std::size_t lex_number(std::size_t pos) {
    // Float first, as jinja2: digits with a fraction and/or an exponent, not right after a '.'.
    if (pos == 0 || src_[pos - 1] != '.') {
      const std::size_t int_end = digits(pos);
      std::size_t frac_end = int_end;
      if (int_end < src_.size() && src_[int_end] == '.') {
        const std::size_t f = digits(int_end + 1);
        if (f > int_end + 1) frac_end = f;
      }
      std::size_t exp_end = frac_end;
      if (frac_end < src_.size() && (src_[frac_end] == 'e' || src_[frac_end] == 'E')) {
        std::size_t e = frac_end + 1;
        if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
        const std::size_t d = digits(e);
        if (d > e) exp_end = d;
      }
      if (exp_end > frac_end || frac_end > int_end) {
        std::string text = src_.substr(pos, exp_end - pos);
        text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
        push(TokenType::kFloat, pos, text).float_value = std::strtod(text.c_str(), nullptr);
        return exp_end;
      }
    }
    int base = 10;
    std::size_t i = pos;
    if (src_[pos] == '0' && pos + 1 < src_.size()) {
      const char p = static_cast<char>(src_[pos + 1] | 0x20);
      base = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 10;
    }
    auto is_base_digit = [&](char c) {
      if (base == 2) return c == '0' || c == '1';
      if (base == 8) return c >= '0' && c <= '7';
      if (base == 16) return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
      return is_digit(c);
    };
    std::string text;
    if (base != 10) {
      i = pos + 2;
      while (i < src_.size()) {
        if (src_[i] == '_' && i + 1 < src_.size() && is_base_digit(src_[i + 1])) ++i;
        if (i >= src_.size() || !is_base_digit(src_[i])) break;
        text += src_[i++];
      }
      if (text.empty()) base = 10, i = pos;  // "0b" alone: the integer 0, then a name
    }
    if (base == 10) {
      // [1-9](_?\d)* or 0(_?0)*
      const bool zero = src_[pos] == '0';
      text = src_[pos];
      i = pos + 1;
      while (i < src_.size()) {
        std::size_t j = i;
        if (src_[j] == '_') ++j;
        if (j >= src_.size() || !is_digit(src_[j]) || (zero && src_[j] != '0')) break;
        text += src_[j];
        i = j + 1;
      }
    }
    errno = 0;
    const long long v = std::strtoll(text.c_str(), nullptr, base);
    if (errno == ERANGE) fail(pos, "integer literal out of range (64-bit integers only)");
    push(TokenType::kInteger, pos, src_.substr(pos, i - pos)).int_value = v;
    return i;
  }

  std::size_t lex_string(std::size_t pos) {
    const char quote = src_[pos];
    std::size_t i = pos + 1;
    while (i < src_.size() && src_[i] != quote) i += (src_[i] == '\\') ? 2 : 1;
    if (i >= src_.size()) fail(pos, "unterminated string literal");
    push(TokenType::kString, pos,
         unescape(pos, std::string_view(src_).substr(pos + 1, i - pos - 1)));
    return i + 1;
  }

  // Python's "unicode-escape" decoding, which jinja2 applies to string literals.
  std::string unescape(std::size_t pos, std::string_view s) const {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\' || i + 1 >= s.size()) {
        out += s[i];
        continue;
      }
      const char c = s[++i];
      switch (c) {
        case '\n':
          break;  // line continuation
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'v':
          out += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          const std::size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
          if (i + n >= s.size()) fail(pos, "truncated \\" + std::string(1, c) + " escape");
          const std::string hex(s.substr(i + 1, n));
          char* end = nullptr;
          const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
          if (end != hex.c_str() + n || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            fail(pos, "invalid \\" + std::string(1, c) + " escape in string literal");
          }
          unicode::append_utf8(out, static_cast<char32_t>(cp));
          i += n;
          break;
        }
        case 'N':
          fail(pos, "\\N{...} escapes in string literals are not supported");
        default:
          if (c >= '0' && c <= '7') {
            char32_t cp = c - '0';
            for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k) {
              cp = cp * 8 + (s[++i] - '0');
            }
            unicode::append_utf8(out, cp);
          } else {
            out += '\\';  // unknown escapes keep their backslash, as Python
            out += c;
          }
      }
    }
    return out;
  }

  std::string src_;
  std::vector<std::size_t> line_starts_;
  std::vector<Token> tokens_;
  bool line_starting_ = true;
};

std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  INFLIGHT_CHECK_CODE(unicode::is_valid_utf8(source), ErrorCode::kInvalidFile,
                      "chat template is not valid UTF-8");
  return Lexer(normalize_newlines(source)).run();
}

}  // namespace inflight::jinja
