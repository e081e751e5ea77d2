#include "tokenizer/chat_template/percent_format.h"

#include <cmath>
#include <cstdio>

#include "tokenizer/chat_template/operators.h"
#include "tokenizer/chat_template/python_format.h"
#include "tokenizer/chat_template/render_error.h"
#include "tokenizer/chat_template/unicode.h"

namespace inflight::jinja {
namespace {

struct Spec {
  bool left = false, zero = false, space = false, plus = false, alt = false;
  int width = -1;
  int precision = -1;
  char type = 's';
};

// Pads `body` (with its sign/prefix already split off into `sign`) to the spec's width.
std::string pad(const Spec& spec, const std::string& sign, const std::string& body, bool numeric) {
  if (spec.width > static_cast<int>(kMaxResultSize)) render_fail("string is too large");
  const int len = static_cast<int>(unicode::length(sign) + unicode::length(body));
  if (spec.width <= len) return sign + body;
  const std::string fill(static_cast<std::size_t>(spec.width - len),
                         spec.zero && numeric && !spec.left ? '0' : ' ');
  if (spec.left) return sign + body + std::string(fill.size(), ' ');
  if (spec.zero && numeric) return sign + fill + body;
  return fill + sign + body;
}

std::string sign_of(const Spec& spec, bool negative) {
  if (negative) return "-";
  if (spec.plus) return "+";
  if (spec.space) return " ";
  return "";
}

std::string format_int(const Spec& spec, const Value& v) {
  std::int64_t n = 0;
  if (v.is_int() || v.is_bool()) {
    n = v.as_integer();
  } else if (v.is_float() && (spec.type == 'd' || spec.type == 'i' || spec.type == 'u')) {
    const double d = v.as_double();
    if (!std::isfinite(d)) render_fail("cannot convert float {} to integer", format_float(d));
    if (std::fabs(d) >= 9.2e18) render_fail("integer beyond 64 bits is not supported");
    n = static_cast<std::int64_t>(std::trunc(d));
  } else {
    if (v.is_undefined()) fail_undefined(v);
    if (spec.type == 'd' || spec.type == 'i' || spec.type == 'u') {
      render_fail("%{} format: a real number is required, not {}", spec.type, v.type_name());
    }
    render_fail("%{} format: an integer is required, not {}", spec.type, v.type_name());
  }
  const bool negative = n < 0;
  const unsigned long long mag =
      negative ? 0ULL - static_cast<unsigned long long>(n) : static_cast<unsigned long long>(n);
  char buf[80];
  const char* conv = spec.type == 'o'   ? "%llo"
                     : spec.type == 'x' ? "%llx"
                     : spec.type == 'X' ? "%llX"
                                        : "%llu";
  std::snprintf(buf, sizeof(buf), conv, mag);
  std::string body = buf;
  if (spec.precision > static_cast<int>(body.size())) {
    body.insert(0, static_cast<std::size_t>(spec.precision) - body.size(), '0');
  }
  std::string sign = sign_of(spec, negative);
  if (spec.alt && spec.type == 'o') sign += "0o";
  if (spec.alt && (spec.type == 'x' || spec.type == 'X')) sign += spec.type == 'x' ? "0x" : "0X";
  return pad(spec, sign, body, true);
}

std::string format_double(const Spec& spec, const Value& v) {
  if (!v.is_number()) {
    if (v.is_undefined()) fail_undefined(v);
    render_fail("must be real number, not {}", v.type_name());
  }
  const double d = v.as_double();
  std::string body;
  if (std::isnan(d) || std::isinf(d)) {
    body = std::isnan(d) ? "nan" : "inf";
    if (spec.type == 'E' || spec.type == 'F' || spec.type == 'G') body = unicode::upper(body);
  } else {
    if (spec.precision > 400) render_fail("precision too big");
    char fmt[16];
    std::snprintf(fmt, sizeof(fmt), "%%%s.%d%c", spec.alt ? "#" : "",
                  spec.precision < 0 ? 6 : spec.precision, spec.type);
    char buf[512];
    std::snprintf(buf, sizeof(buf), fmt, std::fabs(d));
    body = buf;
  }
  return pad(spec, sign_of(spec, std::signbit(d) && !std::isnan(d)), body, std::isfinite(d));
}

std::string format_one(const Spec& spec, const Value& v) {
  switch (spec.type) {
    case 's':
    case 'r':
    case 'a': {
      std::string s = spec.type == 's' ? to_str(v) : to_repr(v);
      if (spec.precision >= 0 && static_cast<std::size_t>(spec.precision) < unicode::length(s)) {
        s = s.substr(0, unicode::byte_offset(s, static_cast<std::size_t>(spec.precision)));
      }
      return pad(spec, "", s, false);
    }
    case 'd':
    case 'i':
    case 'u':
    case 'o':
    case 'x':
    case 'X':
      return format_int(spec, v);
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
      return format_double(spec, v);
    case 'c': {
      std::string s;
      if (v.is_string() && unicode::length(v.str()) == 1) {
        s = v.str();
      } else if (v.is_int() && v.as_int() >= 0 && v.as_int() <= 0x10FFFF) {
        unicode::append_utf8(s, static_cast<char32_t>(v.as_int()));
      } else {
        render_fail("%c requires an int or a unicode character, not {}", v.type_name());
      }
      return pad(spec, "", s, false);
    }
    default:
      render_fail("unsupported format character '{}'", spec.type);
  }
}

}  // namespace

std::string percent_format(std::string_view f, const Value& args) {
  const bool tuple = args.kind() == Value::Kind::kTuple;
  const ValueList single = tuple ? ValueList{} : ValueList{args};
  const ValueList& positional = tuple ? args.items() : single;
  std::size_t next = 0;
  bool used_mapping = false;
  auto take = [&]() -> const Value& {
    if (next >= positional.size()) render_fail("not enough arguments for format string");
    return positional[next++];
  };
  auto number = [&](std::size_t& i) {
    if (i < f.size() && f[i] == '*') {
      ++i;
      const Value& v = take();
      if (!v.is_int()) render_fail("* wants int");
      const auto limit = static_cast<std::int64_t>(kMaxResultSize);
      if (v.as_int() > limit || v.as_int() < -limit) render_fail("width too big");
      return static_cast<int>(v.as_int());
    }
    int n = -1;
    while (i < f.size() && f[i] >= '0' && f[i] <= '9') {
      n = (n < 0 ? 0 : n * 10) + (f[i++] - '0');
      if (n > static_cast<int>(kMaxResultSize)) render_fail("width too big");
    }
    return n;
  };
  std::string out;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) render_fail("incomplete format");
    const Value* mapped = nullptr;
    if (f[i] == '(') {
      const std::size_t close = f.find(')', i);
      if (close == std::string_view::npos) render_fail("incomplete format key");
      if (!args.is_dict()) render_fail("format requires a mapping");
      mapped = args.map().find(f.substr(i + 1, close - i - 1));
      if (mapped == nullptr) render_fail("'{}'", f.substr(i + 1, close - i - 1));
      used_mapping = true;
      i = close + 1;
    }
    Spec spec;
    for (; i < f.size(); ++i) {
      const char c = f[i];
      if (c == '-')
        spec.left = true;
      else if (c == '0')
        spec.zero = true;
      else if (c == ' ')
        spec.space = true;
      else if (c == '+')
        spec.plus = true;
      else if (c == '#')
        spec.alt = true;
      else
        break;
    }
    spec.width = number(i);
    if (spec.width < -1) spec.left = true, spec.width = -spec.width;
    if (i < f.size() && f[i] == '.') {
      ++i;
      spec.precision = std::max(0, number(i));
    }
    while (i < f.size() && (f[i] == 'h' || f[i] == 'l' || f[i] == 'L')) ++i;
    if (i >= f.size()) render_fail("incomplete format");
    spec.type = f[i];
    if (spec.type == '%') {
      out += '%';
      continue;
    }
    out += format_one(spec, mapped != nullptr ? *mapped : take());
    if (out.size() > kMaxResultSize) render_fail("string is too large");
  }
  if (!used_mapping && !args.is_dict() && next < positional.size()) {
    render_fail("not all arguments converted during string formatting");
  }
  return out;
}

}  // namespace inflight::jinja
