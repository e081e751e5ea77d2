// Scalar and string filters (|trim, |tojson, |default, |int, ...) and the filter table; the
// sequence filters (|map, |select, |sort, ...) are in filters_sequence.cc.
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "tokenizer/chat_template/access.h"
#include "tokenizer/chat_template/builtins.h"
#include "tokenizer/chat_template/markup.h"
#include "tokenizer/chat_template/methods.h"
#include "tokenizer/chat_template/operators.h"
#include "tokenizer/chat_template/python_format.h"
#include "tokenizer/chat_template/render_error.h"
#include "tokenizer/chat_template/string_methods.h"
#include "tokenizer/chat_template/unicode.h"

namespace inflight::jinja {

FilterFn find_sequence_filter(std::string_view name);  // filters_sequence.cc

namespace {

Value f_abs(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("abs", a, {});
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool())
    return Value(static_cast<std::int64_t>(std::llabs(v.as_integer())));
  if (v.is_undefined()) fail_undefined(v);
  render_fail("bad operand type for abs(): '{}'", v.type_name());
}

// Only real attributes (methods, namespace attributes), never dict keys.
Value f_attr(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("attr", a, {"name"}, 1);
  const std::string name = to_str(p.get(0));
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_namespace() || v.is_string() || v.is_list_or_tuple()) return get_attr(v, name);
  if (v.is_dict() && find_method(v, name) != MethodLookup::kMissing) return method_value(v, name);
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", v.type_name(), name));
}

Value f_capitalize(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("capitalize", a, {});
  return same_kind(v, unicode::capitalize(to_str(v)));
}

Value f_center(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("center", a, {"width"});
  const Value width = p.get_or(0, Value(80));
  if (!width.is_int() && !width.is_bool()) render_fail("center() width must be an integer");
  return same_kind(v, str::pad(to_str(v), width.as_integer(), " ", '^'));
}

Value f_length(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("length", a, {});
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return Value(0);
    case Value::Kind::kString:
      return Value(static_cast<std::int64_t>(unicode::length(v.str())));
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return Value(static_cast<std::int64_t>(v.items().size()));
    case Value::Kind::kDict:
      return Value(static_cast<std::int64_t>(v.map().size()));
    case Value::Kind::kIterator:
      if (v.iter_state().is_view)
        return Value(static_cast<std::int64_t>(v.iter_state().items.size()));
      break;
    default:
      break;
  }
  render_fail("object of type '{}' has no len()", v.type_name());
}

Value f_default(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("default", a, {"default_value", "boolean"});
  const bool boolean = p.has(1) && p.get(1).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return p.get_or(0, Value(""));
  return v;
}

Value f_escape(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("escape", a, {});
  return escape_to_markup(v);
}

Value f_forceescape(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("forceescape", a, {});
  return Value::markup(html_escape(to_str(v)));
}

// Python float(str): surrounding whitespace, sign, digits with single underscores, inf/nan.
std::optional<double> parse_float(const std::string& text) {
  std::string s = str::strip(text, std::nullopt, true, true);
  std::string cleaned;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      const bool ok = i > 0 && i + 1 < s.size() &&
                      std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
                      std::isdigit(static_cast<unsigned char>(s[i + 1]));
      if (!ok) return std::nullopt;
      continue;
    }
    cleaned += s[i];
  }
  if (cleaned.empty()) return std::nullopt;
  std::string lowered = unicode::lower(cleaned);
  std::size_t k = (lowered[0] == '+' || lowered[0] == '-') ? 1 : 0;
  const std::string word = lowered.substr(k);
  const double sign = lowered[0] == '-' ? -1.0 : 1.0;
  if (word == "inf" || word == "infinity") return sign * HUGE_VAL;
  if (word == "nan") return std::nan("");
  for (char c : word) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != 'e' && c != '+' &&
        c != '-') {
      return std::nullopt;  // rejects hex floats and other strtod extensions
    }
  }
  char* end = nullptr;
  const double d = std::strtod(cleaned.c_str(), &end);
  if (end != cleaned.c_str() + cleaned.size()) return std::nullopt;
  return d;
}

// Python int(str, base): whitespace, sign, optional 0x/0o/0b prefix matching base, underscores.
std::optional<std::int64_t> parse_int(const std::string& text, int base) {
  std::string s = str::strip(text, std::nullopt, true, true);
  bool negative = false;
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i + 1 < s.size() && s[i] == '0') {
    const char p = static_cast<char>(s[i + 1] | 0x20);
    const int prefix_base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefix_base != 0 && (base == prefix_base || base == 0)) {
      base = prefix_base;
      i += 2;
      if (i < s.size() && s[i] == '_') ++i;
    }
  }
  if (base == 0) base = 10;
  std::string digits;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && !digits.empty() && i + 1 < s.size() && s[i + 1] != '_') continue;
    const char c = static_cast<char>(s[i] | 0x20);
    const int d = std::isdigit(static_cast<unsigned char>(s[i])) ? s[i] - '0'
                  : (c >= 'a' && c <= 'z')                       ? c - 'a' + 10
                                                                 : 99;
    if (d >= base) return std::nullopt;
    digits += s[i];
  }
  if (digits.empty()) return std::nullopt;
  errno = 0;
  const long long v = std::strtoll(digits.c_str(), nullptr, base);
  if (errno == ERANGE) return std::nullopt;
  return negative ? -v : v;
}

std::optional<std::int64_t> float_to_int(double d) {
  if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return std::nullopt;
  return static_cast<std::int64_t>(std::trunc(d));
}

Value f_float(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("float", a, {"default"});
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    if (auto d = parse_float(v.str())) return Value(*d);
  }
  return p.get_or(0, Value(0.0));
}

Value f_int(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("int", a, {"default", "base"});
  const Value fallback = p.get_or(0, Value(0));
  if (v.is_int() || v.is_bool()) return Value(v.as_integer());
  if (v.is_float()) {
    if (auto i = float_to_int(v.as_double())) return Value(*i);
    return fallback;
  }
  if (v.is_string()) {
    const Value base = p.get_or(1, Value(10));
    if (!base.is_int()) render_fail("int() base must be an integer");
    if (auto i = parse_int(v.str(), static_cast<int>(base.as_int()))) return Value(*i);
    if (auto d = parse_float(v.str())) {  // "42.23"|int is 42, as jinja2
      if (auto i = float_to_int(*d)) return Value(*i);
    }
  }
  return fallback;
}

Value f_indent(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("indent", a, {"width", "first", "blank"});
  const Value width = p.get_or(0, Value(4));
  std::string indention;
  if (width.is_string()) {
    indention = width.str();
  } else if (width.is_int() || width.is_bool()) {
    if (width.as_integer() > static_cast<std::int64_t>(kMaxResultSize))
      render_fail("string is too large");
    indention =
        std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, width.as_integer())), ' ');
  } else {
    render_fail("can't multiply sequence by non-int of type '{}'", width.type_name());
  }
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_string())
    render_fail("unsupported operand type(s) for +=: '{}' and 'str'", v.type_name());
  const std::vector<std::string> lines = str::splitlines(v.str() + "\n", false);
  std::string rv;
  if (p.has(2) && p.get(2).truthy()) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) rv += "\n" + indention;
      rv += lines[i];
      if (rv.size() > kMaxResultSize) render_fail("string is too large");
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (std::size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
      if (rv.size() > kMaxResultSize) render_fail("string is too large");
    }
  }
  if (p.has(1) && p.get(1).truthy()) rv = indention + rv;
  return same_kind(v, std::move(rv));
}

Value f_items(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("items", a, {});
  if (v.is_undefined()) return Value::iterator("generator", {});
  if (!v.is_dict()) render_fail("Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [k, val] : v.map()) out.push_back(Value::tuple({k, val}));
  return Value::iterator("generator", std::move(out));
}

Value f_lower(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("lower", a, {});
  return same_kind(v, unicode::lower(to_str(v)));
}

Value f_upper(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("upper", a, {});
  return same_kind(v, unicode::upper(to_str(v)));
}

// jinja2's title: upper-case the first character of each word (words start after -, (, {, [,
// < or whitespace), lower-case the rest. Not Python's str.title.
Value f_title(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("title", a, {});
  const std::string s = to_str(v);
  std::string out;
  bool word_start = true;
  for (std::size_t i = 0; i < s.size();) {
    const char32_t cp = unicode::decode(s, i);
    const bool sep =
        cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || unicode::is_space(cp);
    if (word_start) {
      unicode::append_upper(out, cp);
    } else {
      unicode::append_lower(out, cp);
    }
    word_start = sep;
  }
  return same_kind(v, std::move(out));
}

Value f_replace(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("replace", a, {"old", "new", "count"}, 2);
  const Value count = p.get_or(2, Value(nullptr));
  if (!count.is_none() && !count.is_int()) render_fail("replace() count must be an integer");
  return Value(str::replace(to_str(v), to_str(p.get(0)), to_str(p.get(1)),
                            count.is_none() ? -1 : count.as_int()));
}

Value f_round(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("round", a, {"precision", "method"});
  const Value precision_v = p.get_or(0, Value(0));
  const std::string method = to_str(p.get_or(1, Value("common")));
  if (method != "common" && method != "ceil" && method != "floor") {
    render_fail("method must be common, ceil or floor");
  }
  if (!precision_v.is_int() && !precision_v.is_bool()) render_fail("precision must be an integer");
  const std::int64_t precision = precision_v.as_integer();
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_number()) render_fail("type {} doesn't define __round__ method", v.type_name());
  if (method == "common") {
    if (!v.is_float()) return Value(v.as_integer());  // round(int, n) stays an int (n >= 0)
    if (precision > 300) return v;  // beyond double precision: unchanged, as Python
    if (precision < -308) return Value(std::copysign(0.0, v.as_double()));
    if (precision < 0) {
      const double scale = std::pow(10.0, static_cast<double>(precision));
      return Value(std::nearbyint(v.as_double() * scale) / scale);
    }
    char buf[400];  // printf rounds the exact binary value half-to-even, as Python's round
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), v.as_double());
    return Value(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_string(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("string", a, {});
  return v.is_string() ? v : Value(to_str(v));
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False).
Value f_tojson(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  o.ensure_ascii = p.has(0) && p.get(0).truthy();
  if (p.has(1) && !p.get(1).is_none()) {
    const Value& indent = p.get(1);
    if (indent.is_string()) {
      o.indent = indent.str();
    } else if (indent.is_int() || indent.is_bool()) {
      if (indent.as_integer() > 4096)
        render_fail("tojson indent {} is too large", indent.as_integer());
      o.indent = std::string(
          static_cast<std::size_t>(std::max<std::int64_t>(0, indent.as_integer())), ' ');
    } else {
      render_fail("tojson indent must be an integer or a string");
    }
  }
  if (p.has(2) && !p.get(2).is_none()) {
    const Value& seps = p.get(2);
    if (!seps.is_list_or_tuple() || seps.items().size() != 2 || !seps.items()[0].is_string() ||
        !seps.items()[1].is_string()) {
      render_fail("tojson separators must be a pair of strings");
    }
    o.item_separator = seps.items()[0].str();
    o.key_separator = seps.items()[1].str();
  }
  o.sort_keys = p.has(3) && p.get(3).truthy();
  return Value(to_json(v, o));
}

Value f_trim(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("trim", a, {"chars"});
  std::optional<std::string> chars;
  if (p.has(0) && !p.get(0).is_none()) {
    if (!p.get(0).is_string()) render_fail("strip arg must be None or str");
    chars = p.get(0).str();
  }
  return same_kind(v, str::strip(to_str(v), chars, true, true));
}

Value f_wordcount(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("wordcount", a, {});
  const std::string s = to_str(v);
  std::int64_t words = 0;
  bool in_word = false;
  for (std::size_t i = 0; i < s.size();) {
    const char32_t cp = unicode::decode(s, i);
    const bool word_char = (cp < 0x80 && (std::isalnum(static_cast<int>(cp)) || cp == '_')) ||
                           (cp >= 0x80 && unicode::is_printable(cp) && !unicode::is_space(cp));
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value(words);
}

// value|format(*args) is `str(value) % args` (or % kwargs).
Value f_format(Interpreter&, const Value& v, const CallArgs& a) {
  if (!a.positional.empty() && !a.keyword.empty()) {
    render_fail("can't handle positional and keyword arguments at the same time");
  }
  Value args = Value::tuple(a.positional);
  if (!a.keyword.empty()) {
    ValueMap kw;
    for (const auto& [k, val] : a.keyword) kw.set(Value(k), val);
    args = Value::dict(std::move(kw));
  }
  return binary_op(BinaryOp::kMod, v.is_string() ? v : Value(to_str(v)), args);
}

Value f_safe(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("safe", a, {});
  return v.is_markup() ? v : Value::markup(to_str(v));
}

constexpr std::array<std::pair<std::string_view, FilterFn>, 26> kFilters = {{
    {"abs", f_abs},
    {"attr", f_attr},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"length", f_length},
    {"d", f_default},
    {"default", f_default},
    {"e", f_escape},
    {"escape", f_escape},
    {"forceescape", f_forceescape},
    {"float", f_float},
    {"int", f_int},
    {"indent", f_indent},
    {"items", f_items},
    {"lower", f_lower},
    {"upper", f_upper},
    {"title", f_title},
    {"replace", f_replace},
    {"round", f_round},
    {"string", f_string},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"wordcount", f_wordcount},
    {"safe", f_safe},
    {"format", f_format},
}};

}  // namespace

FilterFn find_filter_impl(std::string_view name) {
  for (const auto& [n, fn] : kFilters) {
    if (n == name) return fn;
  }
  return find_sequence_filter(name);
}

}  // namespace inflight::jinja
