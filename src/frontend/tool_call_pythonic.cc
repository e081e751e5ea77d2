// pythonic: a Python list of calls, [get_weather(city="Paris"), now()] (tool_calls.h). The
// keyword arguments' values are Python literals (strings, numbers, True/False/None, lists,
// tuples, dicts), converted to JSON as vLLM's pythonic parser does.
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "frontend/tool_call_formats.h"

namespace inflight::frontend::tool_call_formats {

using json = nlohmann::ordered_json;

namespace {

constexpr std::string_view kPythonStart = "<|python_start|>";
constexpr std::string_view kPythonEnd = "<|python_end|>";
constexpr std::string_view kCallStart = "<|tool_call_start|>";
constexpr std::string_view kCallEnd = "<|tool_call_end|>";

bool ident_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         c == '.';
}

// Reads Python literals and the call list over `text` from `i` on. Every read returns kDone
// (i past it), kOpen (the text ends inside it) or kBad.
class PythonReader {
 public:
  PythonReader(std::string_view text, size_t i) : text_(text), i_(i) {}
  size_t pos() const { return i_; }

  // [f(a=1), g()] into `out` (calls whose name is complete, arguments as far as they are known).
  Scan call_list(std::vector<ToolCall>& out) {
    if (!expect('[')) return Scan::kBad;
    while (true) {
      space();
      if (at_end()) return Scan::kOpen;
      if (text_[i_] == ']') {
        ++i_;
        return Scan::kDone;
      }
      const size_t name_begin = i_;
      while (!at_end() && ident_char(text_[i_])) ++i_;
      if (at_end()) return Scan::kOpen;
      if (i_ == name_begin || text_[i_] != '(') return Scan::kBad;
      ++i_;
      out.push_back(ToolCall{std::string(text_.substr(name_begin, i_ - 1 - name_begin)), {}});
      const Scan args = keyword_args(out.back().arguments);
      if (args != Scan::kDone) return args;
      space();
      if (at_end()) return Scan::kOpen;
      if (text_[i_] == ',')
        ++i_;
      else if (text_[i_] != ']')
        return Scan::kBad;
    }
  }

 private:
  bool at_end() const { return i_ >= text_.size(); }
  void space() {
    while (!at_end() && std::string_view(" \t\r\n").find(text_[i_]) != std::string_view::npos) ++i_;
  }
  bool expect(char c) {
    space();
    if (at_end() || text_[i_] != c) return false;
    ++i_;
    return true;
  }

  // a=1, b="x") after the '(': `arguments` grows by each argument once its delimiter is read.
  Scan keyword_args(std::string& arguments) {
    size_t num_args = 0;
    while (true) {
      space();
      if (at_end()) return Scan::kOpen;
      if (text_[i_] == ')') {
        ++i_;
        arguments += num_args == 0 ? "{}" : "}";
        return Scan::kDone;
      }
      const size_t key_begin = i_;
      while (!at_end() && ident_char(text_[i_])) ++i_;
      const std::string key(text_.substr(key_begin, i_ - key_begin));
      space();
      if (at_end()) return Scan::kOpen;
      if (key.empty() || text_[i_] != '=') return Scan::kBad;  // positional arguments
      ++i_;
      json value;
      const Scan v = literal(value);
      if (v != Scan::kDone) return v;
      space();
      if (at_end()) return Scan::kOpen;
      if (text_[i_] != ',' && text_[i_] != ')') return Scan::kBad;
      if (text_[i_] == ',') ++i_;
      arguments += num_args++ == 0 ? "{" : ", ";
      arguments += json_text(key) + ": " + json_text(value);
    }
  }

  Scan literal(json& out) {
    space();
    if (at_end()) return Scan::kOpen;
    const char c = text_[i_];
    if (c == '"' || c == '\'') return string(out);
    if (c == '[' || c == '(') return sequence(out, c == '[' ? ']' : ')');
    if (c == '{') return dict(out);
    if (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9')) return number(out);
    const size_t begin = i_;
    while (!at_end() && ident_char(text_[i_])) ++i_;
    const std::string_view word = text_.substr(begin, i_ - begin);
    if (at_end()) return Scan::kOpen;
    if (word == "True" || word == "true")
      out = true;
    else if (word == "False" || word == "false")
      out = false;
    else if (word == "None" || word == "null")
      out = nullptr;
    else
      return Scan::kBad;
    return Scan::kDone;
  }

  Scan string(json& out) {
    const char quote = text_[i_++];
    std::string s;
    while (!at_end()) {
      const char c = text_[i_++];
      if (c == quote) {
        out = std::move(s);
        return Scan::kDone;
      }
      if (c != '\\') {
        s += c;
        continue;
      }
      if (at_end()) return Scan::kOpen;
      const char e = text_[i_++];
      switch (e) {
        case 'n':
          s += '\n';
          break;
        case 't':
          s += '\t';
          break;
        case 'r':
          s += '\r';
          break;
        case '0':
          s += '\0';
          break;
        default:
          s += e;  // \\ \' \" and anything else as itself
      }
    }
    return Scan::kOpen;
  }

  Scan number(json& out) {
    const size_t begin = i_;
    while (!at_end() && std::string_view("0123456789+-.eE_xXabcdefABCDEF").find(text_[i_]) !=
                            std::string_view::npos) {
      ++i_;
    }
    if (at_end()) return Scan::kOpen;
    std::string digits(text_.substr(begin, i_ - begin));
    std::erase(digits, '_');
    char* end = nullptr;
    const long long whole = std::strtoll(digits.c_str(), &end, 0);
    if (!digits.empty() && *end == '\0') {
      out = whole;
      return Scan::kDone;
    }
    const double real = std::strtod(digits.c_str(), &end);
    if (digits.empty() || *end != '\0') return Scan::kBad;
    out = real;
    return Scan::kDone;
  }

  Scan sequence(json& out, char close) {
    ++i_;
    out = json::array();
    while (true) {
      space();
      if (at_end()) return Scan::kOpen;
      if (text_[i_] == close) {
        ++i_;
        return Scan::kDone;
      }
      json item;
      const Scan s = literal(item);
      if (s != Scan::kDone) return s;
      out.push_back(std::move(item));
      space();
      if (at_end()) return Scan::kOpen;
      if (text_[i_] == ',')
        ++i_;
      else if (text_[i_] != close)
        return Scan::kBad;
    }
  }

  Scan dict(json& out) {
    ++i_;
    out = json::object();
    while (true) {
      space();
      if (at_end()) return Scan::kOpen;
      if (text_[i_] == '}') {
        ++i_;
        return Scan::kDone;
      }
      json key, value;
      Scan s = literal(key);
      if (s != Scan::kDone) return s;
      if (!expect(':')) return at_end() ? Scan::kOpen : Scan::kBad;
      s = literal(value);
      if (s != Scan::kDone) return s;
      out[key.is_string() ? key.get<std::string>() : json_text(key)] = std::move(value);
      space();
      if (at_end()) return Scan::kOpen;
      if (text_[i_] == ',')
        ++i_;
      else if (text_[i_] != '}')
        return Scan::kBad;
    }
  }

  std::string_view text_;
  size_t i_;
};

}  // namespace

ParsedOutput parse_pythonic(std::string_view text, bool at_end) {
  ParsedOutput out;
  // Where the list starts: after text inside <|tool_call_start|> (LFM2), or the whole output,
  // optionally inside <|python_start|> (Llama 4).
  size_t list = text.find(kCallStart);
  std::string_view end_tag = kCallEnd;
  if (list != std::string_view::npos) {
    out.content = text.substr(0, list);
    list = skip_space(text, list + kCallStart.size());
  } else {
    list = skip_space(text, 0);
    const std::string_view head = text.substr(list);
    if (!at_end && (head.empty() || may_become(head, kPythonStart))) return out;
    if (head.starts_with(kPythonStart)) {
      list = skip_space(text, list + kPythonStart.size());
      end_tag = kPythonEnd;
    } else if (!head.starts_with('[')) {
      add_trailing(out, text, kCallStart, at_end);
      return out;
    }
  }
  if (list == text.size() && !at_end) return out;
  PythonReader reader(text, list);
  const Scan scan = reader.call_list(out.calls);
  if (scan == Scan::kBad || (scan == Scan::kOpen && at_end)) return all_content(text);
  if (scan == Scan::kOpen) return out;
  if (out.calls.empty()) return all_content(text);  // [] calls nothing: the text is prose
  // After the list: its closing tag, then content.
  size_t rest = skip_space(text, reader.pos());
  if (text.substr(rest).starts_with(end_tag)) {
    rest += end_tag.size();
  } else if (!at_end && may_become(text.substr(rest), end_tag)) {
    return out;
  }
  add_content(out, text.substr(rest));
  return out;
}

}  // namespace inflight::frontend::tool_call_formats
