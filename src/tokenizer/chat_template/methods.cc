#include "tokenizer/chat_template/methods.h"

#include <algorithm>
#include <array>

#include "tokenizer/chat_template/markup.h"
#include "tokenizer/chat_template/python_format.h"
#include "tokenizer/chat_template/render_error.h"
#include "tokenizer/chat_template/str_format.h"
#include "tokenizer/chat_template/string_methods.h"
#include "tokenizer/chat_template/unicode.h"

namespace inflight::jinja {
namespace {

constexpr std::array kStrMethods = {
    "strip",        "lstrip",       "rstrip",  "split",     "rsplit",    "splitlines",
    "startswith",   "endswith",     "replace", "upper",     "lower",     "title",
    "capitalize",   "casefold",     "find",    "rfind",     "index",     "rindex",
    "count",        "join",         "isdigit", "isdecimal", "isnumeric", "isalpha",
    "isalnum",      "isspace",      "islower", "isupper",   "partition", "rpartition",
    "removeprefix", "removesuffix", "center",  "ljust",     "rjust",     "zfill",
    "format"};
constexpr std::array kDictMethods = {"get", "items", "keys", "values", "copy"};
constexpr std::array kDictUnsafe = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::array kListMethods = {"index", "count", "copy"};
constexpr std::array kListUnsafe = {"append", "clear", "pop",    "reverse",
                                    "insert", "sort",  "extend", "remove"};

template <std::size_t N>
bool in(const std::array<const char*, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::optional<std::string> opt_str(const ArgParser& p, std::size_t i, std::string_view what) {
  if (!p.has(i) || p.get(i).is_none()) return std::nullopt;
  if (!p.get(i).is_string()) {
    render_fail("{}() argument must be str or None, not {}", what, p.get(i).type_name());
  }
  return p.get(i).str();
}

const std::string& req_str(const ArgParser& p, std::size_t i, std::string_view what) {
  if (!p.get(i).is_string()) {
    render_fail("{}() argument must be str, not {}", what, p.get(i).type_name());
  }
  return p.get(i).str();
}

long long opt_int(const ArgParser& p, std::size_t i, long long fallback, std::string_view what) {
  if (!p.has(i) || p.get(i).is_none()) return fallback;
  if (!p.get(i).is_int() && !p.get(i).is_bool()) {
    render_fail("{}() argument must be an integer, not {}", what, p.get(i).type_name());
  }
  return p.get(i).as_integer();
}

Value string_list(std::vector<std::string> parts) {
  ValueList out;
  out.reserve(parts.size());
  for (auto& s : parts) out.emplace_back(std::move(s));
  return Value::list(std::move(out));
}

bool all_of_cps(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size();) {
    if (!pred(unicode::decode(s, i))) return false;
  }
  return true;
}

bool is_digit_cp(char32_t c) {
  return c >= '0' && c <= '9';
}
bool is_alpha_cp(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0x80 && unicode::is_cased(c));
}
bool is_alnum_cp(char32_t c) {
  return is_alpha_cp(c) || is_digit_cp(c);
}

// islower/isupper: at least one cased character, and no cased one of the other case.
bool has_case(const std::string& s, bool want_lower) {
  bool any = false;
  for (std::size_t i = 0; i < s.size();) {
    const char32_t cp = unicode::decode(s, i);
    if (!unicode::is_cased(cp)) continue;
    std::string one;
    unicode::append_utf8(one, cp);
    const bool is_lower = unicode::upper(one) != one && unicode::lower(one) == one;
    const bool is_upper = unicode::lower(one) != one && unicode::upper(one) == one;
    if (want_lower ? is_upper || !is_lower : is_lower || !is_upper) return false;
    any = true;
  }
  return any;
}

bool affix_matches(const std::string& s, const Value& affix, long long start, long long end,
                   bool at_end, std::string_view what) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) {
      render_fail("{} first arg must be str or a tuple of str, not {}", what, v.type_name());
    }
    const std::size_t n = unicode::length(s);
    long long b = start < 0 ? std::max(0LL, start + static_cast<long long>(n)) : start;
    long long e = end < 0 ? std::max(0LL, end + static_cast<long long>(n)) : end;
    e = std::min<long long>(e, static_cast<long long>(n));
    if (b > static_cast<long long>(n)) return false;
    const std::size_t bb = unicode::byte_offset(s, static_cast<std::size_t>(b));
    const std::size_t eb = unicode::byte_offset(s, static_cast<std::size_t>(std::max(b, e)));
    const std::string_view w = std::string_view(s).substr(bb, eb - bb);
    const std::string& a = v.str();
    if (a.size() > w.size()) return false;
    return at_end ? w.substr(w.size() - a.size()) == a : w.substr(0, a.size()) == a;
  };
  if (affix.kind() == Value::Kind::kTuple) {
    return std::any_of(affix.items().begin(), affix.items().end(), one);
  }
  return one(affix);
}

Value call_str_method(const std::string& s, std::string_view name, const CallArgs& args) {
  const std::string what = "str." + std::string(name);
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ArgParser p(what, args, {"chars"});
    return Value(str::strip(s, opt_str(p, 0, what), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    ArgParser p(what, args, {"sep", "maxsplit"});
    const auto sep = opt_str(p, 0, what);
    if (sep && sep->empty()) render_fail("empty separator");
    const long long maxsplit = opt_int(p, 1, -1, what);
    return string_list(name == "split" ? str::split(s, sep, maxsplit)
                                       : str::rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    ArgParser p(what, args, {"keepends"});
    return string_list(str::splitlines(s, p.has(0) && p.get(0).truthy()));
  }
  if (name == "startswith" || name == "endswith") {
    ArgParser p(what, args, {"prefix", "start", "end"}, 1);
    return Value(affix_matches(s, p.get(0), opt_int(p, 1, 0, what),
                               opt_int(p, 2, static_cast<long long>(s.size()), what),
                               name == "endswith", what));
  }
  if (name == "replace") {
    ArgParser p(what, args, {"old", "new", "count"}, 2);
    return Value(
        str::replace(s, req_str(p, 0, what), req_str(p, 1, what), opt_int(p, 2, -1, what)));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
      name == "casefold") {
    ArgParser p(what, args, {});
    if (name == "upper") return Value(unicode::upper(s));
    if (name == "title") return Value(unicode::title(s));
    if (name == "capitalize") return Value(unicode::capitalize(s));
    return Value(unicode::lower(s));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    ArgParser p(what, args, {"sub", "start", "end"}, 1);
    const std::string& sub = req_str(p, 0, what);
    const long long start = opt_int(p, 1, 0, what);
    const long long end = opt_int(p, 2, static_cast<long long>(s.size()), what);
    if (name == "count") return Value(static_cast<std::int64_t>(str::count(s, sub, start, end)));
    const long long at = str::find(s, sub, start, end, name[0] == 'r');
    if (at < 0 && (name == "index" || name == "rindex")) render_fail("substring not found");
    return Value(static_cast<std::int64_t>(at));
  }
  if (name == "join") {
    ArgParser p(what, args, {"iterable"}, 1);
    std::string out;
    std::size_t i = 0;
    for (const Value& v : iterate(p.get(0))) {
      if (!v.is_string()) {
        render_fail("sequence item {}: expected str instance, {} found", i, v.type_name());
      }
      if (i++ > 0) out += s;
      out += v.str();
    }
    return Value(std::move(out));
  }
  if (name.substr(0, 2) == "is") {
    ArgParser p(what, args, {});
    if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") {
      return Value(all_of_cps(s, is_digit_cp));
    }
    if (name == "isalpha") return Value(all_of_cps(s, is_alpha_cp));
    if (name == "isalnum") return Value(all_of_cps(s, is_alnum_cp));
    if (name == "isspace") return Value(all_of_cps(s, unicode::is_space));
    return Value(has_case(s, name == "islower"));
  }
  if (name == "partition" || name == "rpartition") {
    ArgParser p(what, args, {"sep"}, 1);
    const std::string& sep = req_str(p, 0, what);
    if (sep.empty()) render_fail("empty separator");
    const std::size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos) {
      return name == "partition" ? Value::tuple({Value(s), Value(""), Value("")})
                                 : Value::tuple({Value(""), Value(""), Value(s)});
    }
    return Value::tuple({Value(s.substr(0, at)), Value(sep), Value(s.substr(at + sep.size()))});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ArgParser p(what, args, {"affix"}, 1);
    const std::string& a = req_str(p, 0, what);
    if (name == "removeprefix") {
      return Value(s.compare(0, a.size(), a) == 0 ? s.substr(a.size()) : s);
    }
    const bool ends = s.size() >= a.size() && s.compare(s.size() - a.size(), a.size(), a) == 0;
    return Value(ends ? s.substr(0, s.size() - a.size()) : s);
  }
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    ArgParser p(what, args, {"width", "fillchar"}, 1);
    const long long width = opt_int(p, 0, 0, what);
    if (name == "zfill") {
      const bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
      const std::string body = str::pad(sign ? s.substr(1) : s, width - (sign ? 1 : 0), "0", '>');
      return Value(sign ? s.substr(0, 1) + body : body);
    }
    const auto fill = opt_str(p, 1, what).value_or(" ");
    if (unicode::length(fill) != 1)
      render_fail("The fill character must be exactly one character long");
    return Value(str::pad(s, width, fill, name == "center" ? '^' : name == "ljust" ? '<' : '>'));
  }
  render_fail("str.{}() is not supported in chat templates", name);
}

Value call_dict_method(const Value& d, std::string_view name, const CallArgs& args) {
  const std::string what = "dict." + std::string(name);
  if (name == "get") {
    ArgParser p(what, args, {"key", "default"}, 1);
    check_hashable(p.get(0));
    const Value* v = d.map().find(p.get(0));
    return v != nullptr ? *v : p.get_or(1, Value(nullptr));
  }
  ArgParser p(what, args, {});
  if (name == "copy") return d;
  ValueList out;
  const std::string view = "dict_" + std::string(name);
  out.reserve(d.map().size());
  for (const auto& [k, v] : d.map()) {
    if (name == "items") {
      out.push_back(Value::tuple({k, v}));
    } else if (name == "keys") {
      out.push_back(k);
    } else {
      out.push_back(v);
    }
  }
  return Value::iterator(view, std::move(out), true);
}

Value call_list_method(const Value& l, std::string_view name, const CallArgs& args) {
  const std::string what = std::string(l.type_name()) + "." + std::string(name);
  if (name == "copy") {
    ArgParser p(what, args, {});
    return Value::list(l.items());
  }
  ArgParser p(what, args, {"value"}, 1);
  const ValueList& items = l.items();
  if (name == "count") {
    return Value(static_cast<std::int64_t>(std::count_if(
        items.begin(), items.end(), [&](const Value& v) { return equals(v, p.get(0)); })));
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (equals(items[i], p.get(0))) return Value(static_cast<std::int64_t>(i));
  }
  render_fail("{} is not in {}", to_repr(p.get(0)), l.type_name());
}

// Markup's methods: markupsafe escapes str arguments and returns Markup (or lists of them).
Value call_markup_method(const Value& self, std::string_view name, const CallArgs& args) {
  static constexpr std::array kWrapped = {
      "capitalize", "title",  "lower",  "upper", "replace", "ljust",        "rjust",
      "lstrip",     "rstrip", "center", "strip", "zfill",   "removeprefix", "removesuffix"};
  static constexpr std::array kSplitting = {"split", "rsplit", "splitlines", "partition",
                                            "rpartition"};
  if (in(kWrapped, name)) {
    CallArgs escaped = args;
    for (Value& v : escaped.positional) {
      if (v.is_string()) v = escape_to_markup(v);
    }
    for (auto& [k, v] : escaped.keyword) {
      if (v.is_string()) v = escape_to_markup(v);
    }
    return Value::markup(call_str_method(self.str(), name, escaped).str());
  }
  if (in(kSplitting, name)) {
    const Value parts = call_str_method(self.str(), name, args);
    ValueList items;
    for (const Value& part : parts.items()) items.push_back(Value::markup(part.str()));
    return parts.kind() == Value::Kind::kTuple ? Value::tuple(std::move(items))
                                               : Value::list(std::move(items));
  }
  if (name == "join") {
    ArgParser p("Markup.join", args, {"iterable"}, 1);
    ValueList escaped;
    for (const Value& v : iterate(p.get(0))) escaped.push_back(escape_to_markup(v));
    return Value::markup(
        call_str_method(self.str(), name, {{Value::list(std::move(escaped))}, {}}).str());
  }
  return call_str_method(self.str(), name, args);
}

}  // namespace

MethodLookup find_method(const Value& object, std::string_view name) {
  switch (object.kind()) {
    case Value::Kind::kString:
      return in(kStrMethods, name) ? MethodLookup::kFound : MethodLookup::kMissing;
    case Value::Kind::kDict:
      if (in(kDictMethods, name)) return MethodLookup::kFound;
      return in(kDictUnsafe, name) ? MethodLookup::kUnsafe : MethodLookup::kMissing;
    case Value::Kind::kList:
      if (in(kListMethods, name)) return MethodLookup::kFound;
      return in(kListUnsafe, name) ? MethodLookup::kUnsafe : MethodLookup::kMissing;
    case Value::Kind::kTuple:
      return (name == "index" || name == "count") ? MethodLookup::kFound : MethodLookup::kMissing;
    default:
      return MethodLookup::kMissing;
  }
}

Value call_method(Interpreter& interp, const Value& object, std::string_view name,
                  const CallArgs& args) {
  if (object.is_markup()) {
    if (name == "format") render_fail("Markup.format() is not supported in chat templates");
    return call_markup_method(object, name, args);
  }
  if (object.is_string()) {
    if (name == "format") return Value(str_format(object.str(), args));
    return call_str_method(object.str(), name, args);
  }
  if (object.is_dict()) return call_dict_method(object, name, args);
  return call_list_method(object, name, args);
}

Value method_value(const Value& object, std::string_view name) {
  switch (find_method(object, name)) {
    case MethodLookup::kFound:
      return Value::callable(
          std::string(object.type_name()) + "." + std::string(name),
          [object, method = std::string(name)](Interpreter& interp, const CallArgs& args) {
            return call_method(interp, object, method, args);
          },
          &object);
    case MethodLookup::kUnsafe:
      return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.",
                                          name, object.type_name()),
                              true);
    case MethodLookup::kMissing:
      break;
  }
  return Value::undefined(
      fmt::format("'{} object' has no attribute '{}'", object.type_name(), name));
}

}  // namespace inflight::jinja
