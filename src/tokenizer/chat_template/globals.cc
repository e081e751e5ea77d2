// Global functions (range, namespace, dict, joiner, raise_exception, strftime_now) and the
// name tables that tell jinja2's built-in filters and tests from unknown names.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "tokenizer/chat_template/builtins.h"
#include "tokenizer/chat_template/interpreter.h"
#include "tokenizer/chat_template/python_format.h"
#include "tokenizer/chat_template/render_error.h"

namespace inflight::jinja {
namespace {

// jinja2's sandbox refuses larger ranges (MAX_RANGE).
constexpr std::int64_t kMaxRange = 100000;

constexpr std::array<std::string_view, 54> kJinjaFilters = {
    "abs",    "attr",       "batch",       "capitalize", "center",   "count",
    "d",      "default",    "dictsort",    "e",          "escape",   "filesizeformat",
    "first",  "float",      "forceescape", "format",     "groupby",  "indent",
    "int",    "items",      "join",        "last",       "length",   "list",
    "lower",  "map",        "max",         "min",        "pprint",   "random",
    "reject", "rejectattr", "replace",     "reverse",    "round",    "safe",
    "select", "selectattr", "slice",       "sort",       "string",   "striptags",
    "sum",    "title",      "tojson",      "trim",       "truncate", "unique",
    "upper",  "urlencode",  "urlize",      "wordcount",  "wordwrap", "xmlattr"};

constexpr std::array<std::string_view, 39> kJinjaTests = {
    "!=",       "<",        "<=",          "==",       ">",           ">=",       "boolean",
    "callable", "defined",  "divisibleby", "eq",       "equalto",     "escaped",  "even",
    "false",    "filter",   "float",       "ge",       "greaterthan", "gt",       "in",
    "integer",  "iterable", "le",          "lessthan", "lower",       "lt",       "mapping",
    "ne",       "none",     "number",      "odd",      "sameas",      "sequence", "string",
    "test",     "true",     "undefined",   "upper"};

std::int64_t int_arg(const Value& v, std::string_view what) {
  if (!v.is_int() && !v.is_bool()) {
    render_fail("'{}' object cannot be interpreted as an integer ({})", v.type_name(), what);
  }
  return v.as_integer();
}

Value g_range(Interpreter&, const CallArgs& a) {
  if (!a.keyword.empty()) render_fail("range() takes no keyword arguments");
  const auto& p = a.positional;
  if (p.empty() || p.size() > 3) render_fail("range expected 1 to 3 arguments, got {}", p.size());
  std::int64_t start = 0, stop = 0, step = 1;
  if (p.size() == 1) {
    stop = int_arg(p[0], "range");
  } else {
    start = int_arg(p[0], "range");
    stop = int_arg(p[1], "range");
    if (p.size() == 3) step = int_arg(p[2], "range");
  }
  if (step == 0) render_fail("range() arg 3 must not be zero");
  const long double span = (static_cast<long double>(stop) - start) / step;
  if (span > kMaxRange) {
    render_fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
  }
  const auto n = span <= 0 ? std::int64_t{0} : static_cast<std::int64_t>(std::ceil(span));
  ValueList out;
  out.reserve(static_cast<std::size_t>(n));
  std::int64_t value = start;
  for (std::int64_t i = 0; i < n; ++i) {
    out.emplace_back(value);
    // Past the last item the next value may not fit in 64 bits; it is never used then.
    if (i + 1 < n && __builtin_add_overflow(value, step, &value)) render_fail("range overflows");
  }
  return Value::list(std::move(out));
}

// dict(mapping_or_pairs, **kwargs), as namespace() and dict() take it.
ValueMap mapping_args(const CallArgs& a, std::string_view what) {
  if (a.positional.size() > 1)
    render_fail("{} expected at most 1 argument, got {}", what, a.positional.size());
  ValueMap map;
  if (!a.positional.empty()) {
    const Value& init = a.positional[0];
    if (init.is_dict()) {
      map = init.map();
    } else {
      for (const Value& pair : iterate(init)) {
        if (!pair.is_list_or_tuple() || pair.items().size() != 2) {
          render_fail("{} sequence elements must be (key, value) pairs", what);
        }
        check_hashable(pair.items()[0]);
        map.set(pair.items()[0], pair.items()[1]);
      }
    }
  }
  for (const auto& [k, v] : a.keyword) map.set(k, v);
  return map;
}

Value g_namespace(Interpreter& interp, const CallArgs& a) {
  Value ns = Value::new_namespace(mapping_args(a, "namespace()"));
  interp.adopt_namespace(ns);
  return ns;
}

Value g_dict(Interpreter&, const CallArgs& a) {
  return Value::dict(mapping_args(a, "dict()"));
}

Value g_joiner(Interpreter&, const CallArgs& a) {
  ArgParser p("joiner", a, {"sep"});
  auto used = std::make_shared<bool>(false);
  return Value::callable(
      "joiner", [sep = to_str(p.get_or(0, Value(", "))), used](Interpreter&, const CallArgs&) {
        if (!*used) {
          *used = true;
          return Value("");
        }
        return Value(sep);
      });
}

Value g_raise_exception(Interpreter&, const CallArgs& a) {
  ArgParser p("raise_exception", a, {"message"}, 1);
  throw RenderError(RenderError::Kind::kRaised, to_str(p.get(0)));
}

// "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM:SS" as a naive time.
std::tm parse_fixed_now(const std::string& s) {
  std::tm tm{};
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  char tail = 0;
  const int n = std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &year, &month, &day, &hour,
                            &minute, &second, &tail);
  const bool date_only = n == 3 && s.size() == 10;
  if (!(date_only || (n == 6 && s.size() == 19)) || month < 1 || month > 12 || day < 1 ||
      day > 31 || hour > 23 || minute > 59 || second > 60) {
    render_fail("fixed time '{}' is not YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS", s);
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t t = timegm(&tm);  // normalises and fills tm_wday / tm_yday
  gmtime_r(&t, &tm);
  return tm;
}

// datetime.now().strftime(format): a naive local time, so %z and %Z are empty.
Value g_strftime_now(Interpreter& interp, const CallArgs& a) {
  ArgParser p("strftime_now", a, {"format"}, 1);
  if (!p.get(0).is_string())
    render_fail("strftime() argument 1 must be str, not {}", p.get(0).type_name());
  std::tm tm{};
  long micros = 0;
  if (!interp.settings().fixed_now.empty()) {
    tm = parse_fixed_now(interp.settings().fixed_now);
  } else {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    localtime_r(&t, &tm);
    micros = static_cast<long>(
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
        1000000);
  }
  std::string format;  // Python expands %f, %z and %Z itself
  const std::string& in = p.get(0).str();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 1 < in.size()) {
      const char c = in[i + 1];
      if (c == 'f') {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "%06ld", micros);
        format += buf;
        ++i;
        continue;
      }
      if (c == 'z' || c == 'Z') {
        ++i;
        continue;
      }
      if (c == '%') {
        format += "%%";
        ++i;
        continue;
      }
    }
    format += in[i];
  }
  if (format.empty()) return Value("");
  std::string out(256 + format.size() * 64, '\0');
  const std::size_t n = std::strftime(out.data(), out.size(), format.c_str(), &tm);
  out.resize(n);
  return Value(std::move(out));
}

struct Global {
  std::string_view name;
  Value (*fn)(Interpreter&, const CallArgs&);
};

constexpr std::array<Global, 6> kGlobals = {{
    {"range", g_range},
    {"namespace", g_namespace},
    {"dict", g_dict},
    {"joiner", g_joiner},
    {"raise_exception", g_raise_exception},
    {"strftime_now", g_strftime_now},
}};

}  // namespace

FilterFn find_filter(std::string_view name) {
  return find_filter_impl(name);
}
TestFn find_test(std::string_view name) {
  return find_test_impl(name);
}

bool is_jinja_filter(std::string_view name) {
  return std::find(kJinjaFilters.begin(), kJinjaFilters.end(), name) != kJinjaFilters.end();
}

bool is_jinja_test(std::string_view name) {
  return std::find(kJinjaTests.begin(), kJinjaTests.end(), name) != kJinjaTests.end();
}

Value find_global(std::string_view name) {
  for (const Global& g : kGlobals) {
    if (g.name == name) {
      // Global functions are stateless (joiner() makes its state per call): one shared value.
      static const std::array<Value, kGlobals.size()> values = [] {
        std::array<Value, kGlobals.size()> v;
        for (std::size_t i = 0; i < kGlobals.size(); ++i) {
          v[i] = Value::callable(std::string(kGlobals[i].name), kGlobals[i].fn);
        }
        return v;
      }();
      return values[static_cast<std::size_t>(&g - kGlobals.data())];
    }
  }
  if (name == "cycler" || name == "lipsum") {
    return Value::undefined(std::string(name) + "() is not supported in chat templates");
  }
  return Value();
}

}  // namespace inflight::jinja
