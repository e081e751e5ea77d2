#include "tokenizer/chat_template/str_format.h"

#include <cmath>
#include <cstdio>

#include "tokenizer/chat_template/python_format.h"
#include "tokenizer/chat_template/render_error.h"
#include "tokenizer/chat_template/unicode.h"

namespace inflight::jinja {
namespace {

// One parsed format spec: [[fill]align][sign][#][0][width][,|_][.precision][type].
struct FormatSpec {
  std::string fill = " ";
  char align = 0;  // '<', '>', '^', '=' or 0 (the type's default)
  char sign = '-';
  bool alt = false;
  int width = 0;
  char grouping = 0;
  int precision = -1;
  char type = 0;
};

bool is_align(char c) {
  return c == '<' || c == '>' || c == '^' || c == '=';
}

int parse_number(std::string_view s, std::size_t& i) {
  long long n = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    n = n * 10 + (s[i++] - '0');
    if (n > static_cast<long long>(kMaxResultSize))
      render_fail("Too many decimal digits in format string");
  }
  return static_cast<int>(n);
}

FormatSpec parse_spec(std::string_view s) {
  FormatSpec f;
  std::size_t i = 0;
  // A fill is one code point followed by an alignment.
  const std::size_t first =
      s.empty() ? 0 : unicode::byte_offset(s, std::min<std::size_t>(1, unicode::length(s)));
  if (first > 0 && first < s.size() && is_align(s[first])) {
    f.fill = std::string(s.substr(0, first));
    f.align = s[first];
    i = first + 1;
  } else if (!s.empty() && is_align(s[0])) {
    f.align = s[0];
    i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) f.sign = s[i++];
  if (i < s.size() && s[i] == '#') f.alt = true, ++i;
  if (i < s.size() && s[i] == '0') {
    if (f.align == 0) f.fill = "0", f.align = '=';
    ++i;
  }
  f.width = parse_number(s, i);
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) f.grouping = s[i++];
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (i >= s.size() || s[i] < '0' || s[i] > '9')
      render_fail("Format specifier missing precision");
    f.precision = parse_number(s, i);
  }
  if (i < s.size()) f.type = s[i++];
  if (i < s.size()) render_fail("Invalid format specifier '{}'", s);
  return f;
}

// Inserts the grouping separator every three digits of the integer part of `digits`.
std::string group(const std::string& digits, char separator) {
  if (separator == 0) return digits;
  std::size_t end = digits.find_first_not_of("0123456789");
  if (end == std::string::npos) end = digits.size();
  std::string out;
  for (std::size_t i = 0; i < end; ++i) {
    if (i > 0 && (end - i) % 3 == 0) out += separator;
    out += digits[i];
  }
  return out + digits.substr(end);
}

// Pads sign + body to the spec's width, aligned as asked (`numeric`: right by default).
std::string align(const FormatSpec& f, const std::string& sign, const std::string& body,
                  bool numeric) {
  const std::size_t len = unicode::length(sign) + unicode::length(body);
  if (f.width > static_cast<int>(kMaxResultSize)) render_fail("string is too large");
  if (static_cast<std::size_t>(f.width) <= len) return sign + body;
  const std::size_t pad = static_cast<std::size_t>(f.width) - len;
  auto fill = [&](std::size_t n) {
    std::string out;
    for (std::size_t k = 0; k < n; ++k) out += f.fill;
    return out;
  };
  switch (f.align ? f.align : (numeric ? '>' : '<')) {
    case '<':
      return sign + body + fill(pad);
    case '^':
      return fill(pad / 2) + sign + body + fill(pad - pad / 2);
    case '=':
      return sign + fill(pad) + body;
    default:
      return fill(pad) + sign + body;
  }
}

std::string sign_text(const FormatSpec& f, bool negative) {
  if (negative) return "-";
  return f.sign == '+' ? "+" : f.sign == ' ' ? " " : "";
}

std::string format_integer(const FormatSpec& f, std::int64_t n) {
  const bool negative = n < 0;
  const unsigned long long mag =
      negative ? 0ULL - static_cast<unsigned long long>(n) : static_cast<unsigned long long>(n);
  std::string digits, prefix;
  if (f.type == 'b') {
    unsigned long long m = mag;
    do {
      digits.insert(digits.begin(), static_cast<char>('0' + (m & 1)));
      m >>= 1;
    } while (m != 0);
    prefix = "0b";
  } else {
    char buf[32];
    const char* conv = f.type == 'o'   ? "%llo"
                       : f.type == 'x' ? "%llx"
                       : f.type == 'X' ? "%llX"
                                       : "%llu";
    std::snprintf(buf, sizeof(buf), conv, mag);
    digits = buf;
    prefix = f.type == 'o' ? "0o" : f.type == 'x' ? "0x" : f.type == 'X' ? "0X" : "";
  }
  std::string sign = sign_text(f, negative);
  if (f.alt) sign += prefix;
  return align(f, sign, group(digits, f.grouping), true);
}

std::string format_real(const FormatSpec& f, double d) {
  if (!std::isfinite(d)) {
    std::string body = std::isnan(d) ? "nan" : "inf";
    if (f.type == 'E' || f.type == 'F' || f.type == 'G') body = unicode::upper(body);
    return align(f, sign_text(f, d < 0), body, true);
  }
  const bool negative = std::signbit(d);
  std::string body;
  if (f.type == 0 && f.precision < 0) {
    body = format_float(std::fabs(d));  // str(x)
  } else {
    const char type = f.type == 0 ? 'g' : f.type == '%' ? 'f' : f.type;
    const double value = f.type == '%' ? std::fabs(d) * 100.0 : std::fabs(d);
    if (f.precision > 400) render_fail("precision too big");
    char fmt[16], buf[512];
    std::snprintf(fmt, sizeof(fmt), "%%%s.%d%c", f.alt ? "#" : "",
                  f.precision < 0 ? 6 : f.precision, type);
    std::snprintf(buf, sizeof(buf), fmt, value);
    body = buf;
    if (f.type == '%') body += '%';
  }
  return align(f, sign_text(f, negative), group(body, f.grouping), true);
}

// format(value, spec) for the types a template holds.
std::string format_value(const Value& v, std::string_view spec_text) {
  const FormatSpec f = parse_spec(spec_text);
  const bool integer_type = f.type == 'd' || f.type == 'b' || f.type == 'o' || f.type == 'x' ||
                            f.type == 'X' || f.type == 'n' || f.type == 'c';
  const bool real_type = f.type == 'e' || f.type == 'E' || f.type == 'f' || f.type == 'F' ||
                         f.type == 'g' || f.type == 'G' || f.type == '%';
  // A bool is an int to any non-empty spec (format(True, '>4') == '   1'), str() to an empty one.
  if ((v.is_int() || v.is_bool()) &&
      (integer_type || (f.type == 0 && (!v.is_bool() || !spec_text.empty())))) {
    if (f.type == 'c') {
      std::string s;
      if (v.as_integer() < 0 || v.as_integer() > 0x10FFFF)
        render_fail("%c arg not in range(0x110000)");
      unicode::append_utf8(s, static_cast<char32_t>(v.as_integer()));
      return align(f, "", s, false);
    }
    if (f.precision >= 0) render_fail("Precision not allowed in integer format specifier");
    return format_integer(f, v.as_integer());
  }
  if (v.is_number() && (real_type || (f.type == 0 && v.is_float()))) {
    return format_real(f, v.as_double());
  }
  if (f.type != 0 && f.type != 's') {
    render_fail("Unknown format code '{}' for object of type '{}'", f.type, v.type_name());
  }
  if (v.is_undefined()) fail_undefined(v);
  std::string s = to_str(v);
  if (f.precision >= 0 && static_cast<std::size_t>(f.precision) < unicode::length(s)) {
    s = s.substr(0, unicode::byte_offset(s, static_cast<std::size_t>(f.precision)));
  }
  return align(f, "", s, false);
}

// ascii(x): repr(x) with every non-ASCII code point escaped (\xNN, \uNNNN, \UNNNNNNNN).
std::string to_ascii(const Value& v) {
  const std::string repr = to_repr(v);
  std::string out;
  for (std::size_t i = 0; i < repr.size();) {
    const auto byte = static_cast<unsigned char>(repr[i]);
    if (byte < 0x80) {
      out += repr[i++];
      continue;
    }
    const char32_t cp = unicode::decode(repr, i);  // advances i past the code point
    char buf[16];
    if (cp < 0x100) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
    } else if (cp < 0x10000) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
    } else {
      std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
    }
    out += buf;
  }
  return out;
}

// The argument a field names: "" (next automatic), "3", "name", then "[key]" lookups.
const Value& lookup(std::string_view name, const CallArgs& args, int& next_auto, bool& manual) {
  const std::size_t end = name.find_first_of(".[");
  const std::string_view head = name.substr(0, end);
  const Value* v = nullptr;
  if (head.empty() || (head[0] >= '0' && head[0] <= '9')) {
    std::size_t index;
    if (head.empty()) {
      if (manual)
        render_fail("cannot switch from manual field specification to automatic field numbering");
      index = static_cast<std::size_t>(next_auto++);
    } else {
      if (next_auto > 0)
        render_fail("cannot switch from automatic field numbering to manual field specification");
      manual = true;
      std::size_t i = 0;
      index = static_cast<std::size_t>(parse_number(head, i));
      if (i != head.size()) render_fail("invalid format field '{}'", head);
    }
    if (index >= args.positional.size()) {
      render_fail("Replacement index {} out of range for positional args tuple", index);
    }
    v = &args.positional[index];
  } else {
    for (const auto& [key, value] : args.keyword) {
      if (key == head) v = &value;
    }
    if (v == nullptr) render_fail("KeyError: '{}'", head);
  }
  std::string_view rest = end == std::string_view::npos ? std::string_view() : name.substr(end);
  while (!rest.empty()) {
    if (rest[0] == '.')
      render_fail("attribute fields ('{}') are not supported in chat templates", name);
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) render_fail("Missing ']' in format string");
    const std::string_view key = rest.substr(1, close - 1);
    rest = rest.substr(close + 1);
    if (v->is_dict()) {
      const Value* found = v->map().find(key);
      if (found == nullptr) render_fail("KeyError: '{}'", key);
      v = found;
    } else if (v->is_list_or_tuple()) {
      std::size_t i = 0;
      const auto at = static_cast<std::size_t>(parse_number(key, i));
      if (i != key.size() || key.empty()) render_fail("list indices must be integers, not str");
      if (at >= v->items().size()) render_fail("IndexError: list index out of range");
      v = &v->items()[at];
    } else {
      render_fail("'{}' object is not subscriptable", v->type_name());
    }
  }
  return *v;
}

}  // namespace

std::string str_format(std::string_view f, const CallArgs& args) {
  std::string out;
  int next_auto = 0;
  bool manual = false;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      render_fail("Single '}}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const std::size_t close = f.find('}', i + 1);
    if (close == std::string_view::npos) render_fail("expected '}}' before end of string");
    const std::string_view field = f.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string_view::npos) {
      render_fail("nested replacement fields are not supported in chat templates");
    }
    const std::size_t colon = field.find(':');
    std::string_view name = field.substr(0, colon);
    const std::string_view spec = colon == std::string_view::npos ? "" : field.substr(colon + 1);
    char conversion = 0;
    if (const std::size_t bang = name.find('!'); bang != std::string_view::npos) {
      if (bang + 2 != name.size()) render_fail("expected ':' after conversion specifier");
      conversion = name[bang + 1];
      if (conversion != 's' && conversion != 'r' && conversion != 'a') {
        render_fail("Unknown conversion specifier {}", conversion);
      }
      name = name.substr(0, bang);
    }
    const Value& v = lookup(name, args, next_auto, manual);
    const std::string piece = conversion == 0     ? format_value(v, spec)
                              : conversion == 's' ? format_value(Value(to_str(v)), spec)
                              : conversion == 'r' ? format_value(Value(to_repr(v)), spec)
                                                  : format_value(Value(to_ascii(v)), spec);
    if (out.size() + piece.size() > kMaxResultSize) render_fail("string is too large");
    out += piece;
    i = close;
  }
  return out;
}

}  // namespace inflight::jinja
