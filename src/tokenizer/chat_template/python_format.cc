#include "tokenizer/chat_template/python_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tokenizer/chat_template/render_error.h"
#include "tokenizer/chat_template/unicode.h"

namespace inflight::jinja {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void append_hex(std::string& out, char32_t cp, int digits) {
  for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) out += kHex[(cp >> shift) & 0xF];
}

void append_repr_string(std::string& out, const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out += quote;
  for (std::size_t i = 0; i < s.size();) {
    const char32_t cp = unicode::decode(s, i);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (unicode::is_printable(cp)) {
      unicode::append_utf8(out, cp);
    } else if (cp < 0x100) {
      out += "\\x";
      append_hex(out, cp, 2);
    } else if (cp < 0x10000) {
      out += "\\u";
      append_hex(out, cp, 4);
    } else {
      out += "\\U";
      append_hex(out, cp, 8);
    }
  }
  out += quote;
}

// Printing recurses into containers and namespaces; only namespaces can form cycles
// (`{% set ns.self = ns %}`), which this bound turns into an error instead of a crash.
constexpr int kMaxPrintDepth = static_cast<int>(kMaxNesting) + 8;

void append_str_at(std::string& out, const Value& value, int depth);
void append_repr(std::string& out, const Value& value, int depth);

void append_sequence(std::string& out, const Value& value, int depth) {
  const bool tuple = value.kind() == Value::Kind::kTuple;
  out += tuple ? '(' : '[';
  const ValueList& items = value.items();
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    append_repr(out, items[i], depth + 1);
  }
  if (tuple && items.size() == 1) out += ',';
  out += tuple ? ')' : ']';
}

void append_map(std::string& out, const ValueMap& map, int depth) {
  out += '{';
  bool first = true;
  for (const auto& [k, v] : map) {
    if (!first) out += ", ";
    first = false;
    append_repr(out, k, depth + 1);
    out += ": ";
    append_repr(out, v, depth + 1);
  }
  out += '}';
}

void append_repr(std::string& out, const Value& value, int depth) {
  switch (value.kind()) {
    case Value::Kind::kString:
      append_repr_string(out, value.str());
      return;
    case Value::Kind::kUndefined:
      out += "Undefined";
      return;
    default:
      append_str_at(out, value, depth);
      return;
  }
}

// --- JSON -------------------------------------------------------------------------------------

void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const char32_t cp = unicode::decode(s, i);
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (cp < 0x20 || (ensure_ascii && cp > 0x7E)) {
      if (cp >= 0x10000) {  // UTF-16 surrogate pair
        const char32_t v = cp - 0x10000;
        out += "\\u";
        append_hex(out, 0xD800 | (v >> 10), 4);
        out += "\\u";
        append_hex(out, 0xDC00 | (v & 0x3FF), 4);
      } else {
        out += "\\u";
        append_hex(out, cp, 4);
      }
    } else {
      unicode::append_utf8(out, cp);
    }
  }
  out += '"';
}

// json.dumps turns non-string keys into strings: 1 -> "1", 1.5 -> "1.5", True -> "true".
std::string json_key(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kString:
      return key.str();
    case Value::Kind::kNone:
      return "null";
    case Value::Kind::kBool:
      return key.as_bool() ? "true" : "false";
    case Value::Kind::kInt:
      return std::to_string(key.as_int());
    case Value::Kind::kFloat: {
      const double d = key.as_double();
      if (std::isnan(d)) return "NaN";
      if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
      return format_float(d);
    }
    default:
      render_fail("keys must be str, int, float, bool or None, not {}", key.type_name());
  }
}

struct JsonWriter {
  const JsonOptions& options;
  std::string item_separator;
  std::string out;

  void newline(int depth) {
    if (out.size() > kMaxResultSize) render_fail("string is too large");
    out += '\n';
    for (int i = 0; i < depth; ++i) out += *options.indent;
  }

  void write(const Value& value, int depth) {
    switch (value.kind()) {
      case Value::Kind::kNone:
        out += "null";
        return;
      case Value::Kind::kBool:
        out += value.as_bool() ? "true" : "false";
        return;
      case Value::Kind::kInt:
        out += std::to_string(value.as_int());
        return;
      case Value::Kind::kFloat: {
        const double d = value.as_double();
        if (std::isnan(d)) {
          out += "NaN";
        } else if (std::isinf(d)) {
          out += d > 0 ? "Infinity" : "-Infinity";
        } else {
          out += format_float(d);
        }
        return;
      }
      case Value::Kind::kString:
        append_json_string(out, value.str(), options.ensure_ascii);
        return;
      case Value::Kind::kList:
      case Value::Kind::kTuple:
        write_list(value.items(), depth);
        return;
      case Value::Kind::kDict:
        write_map(value.map(), depth);
        return;
      default:
        render_fail("Object of type {} is not JSON serializable", value.type_name());
    }
  }

  void write_list(const ValueList& items, int depth) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_separator;
      if (options.indent) newline(depth + 1);
      write(items[i], depth + 1);
    }
    if (options.indent) newline(depth);
    out += ']';
  }

  void write_map(const ValueMap& map, int depth) {
    if (map.empty()) {
      out += "{}";
      return;
    }
    std::vector<const ValueMap::Entry*> entries;
    for (const auto& e : map) entries.push_back(&e);
    if (options.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return less(a->first, b->first); });
    }
    out += '{';
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out += item_separator;
      if (options.indent) newline(depth + 1);
      append_json_string(out, json_key(entries[i]->first), options.ensure_ascii);
      out += options.key_separator;
      write(entries[i]->second, depth + 1);
    }
    if (options.indent) newline(depth);
    out += '}';
  }
};

}  // namespace

std::string format_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0.0) return std::signbit(value) ? "-0.0" : "0.0";
  // Shortest precision that round-trips, as Python's repr.
  char buf[40];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  // buf is "[-]d.ddde[+-]XX": split into sign, digits and decimal exponent.
  std::string s(buf);
  const bool negative = s[0] == '-';
  if (negative) s.erase(0, 1);
  const std::size_t e = s.find('e');
  const int exponent = std::atoi(s.c_str() + e + 1);
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int ndigits = static_cast<int>(digits.size());
  const int point = exponent + 1;  // position of the decimal point within digits
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits[0];
    if (ndigits > 1) {
      out += '.';
      out += digits.substr(1);
    }
    char exp[16];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  } else if (point <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-point), '0');
    out += digits;
  } else if (point >= ndigits) {
    out += digits + std::string(point - ndigits, '0') + ".0";
  } else {
    out += digits.substr(0, point);
    out += '.';
    out += digits.substr(point);
  }
  return out;
}

void append_str(std::string& out, const Value& value) {
  append_str_at(out, value, 0);
}

namespace {

void append_str_at(std::string& out, const Value& value, int depth) {
  if (depth > kMaxPrintDepth) render_fail("value nested too deeply to print");
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return;
    case Value::Kind::kNone:
      out += "None";
      return;
    case Value::Kind::kBool:
      out += value.as_bool() ? "True" : "False";
      return;
    case Value::Kind::kInt:
      out += std::to_string(value.as_int());
      return;
    case Value::Kind::kFloat:
      out += format_float(value.as_double());
      return;
    case Value::Kind::kString:
      out += value.str();
      return;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      append_sequence(out, value, depth);
      return;
    case Value::Kind::kDict:
      append_map(out, value.map(), depth);
      return;
    case Value::Kind::kNamespace:
      out += "<Namespace ";
      append_map(out, value.ns().attrs, depth);
      out += '>';
      return;
    case Value::Kind::kCallable:
      out += "<" + value.callable().name + ">";
      return;
    case Value::Kind::kIterator: {
      const IterState& it = value.iter_state();
      if (!it.is_view) {
        out += "<" + it.type_name + " object>";
        return;
      }
      out += it.type_name + "(";
      append_sequence(out, Value::list(it.items), depth);
      out += ")";
      return;
    }
  }
}

}  // namespace

std::string to_str(const Value& value) {
  if (value.is_string()) return value.str();
  std::string out;
  append_str(out, value);
  return out;
}

std::string to_repr(const Value& value) {
  std::string out;
  append_repr(out, value, 0);
  return out;
}

std::string to_json(const Value& value, const JsonOptions& options) {
  JsonWriter w{options, options.item_separator.value_or(options.indent ? "," : ", "), {}};
  w.write(value, 0);
  return std::move(w.out);
}

}  // namespace inflight::jinja
