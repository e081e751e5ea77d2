// Sequence filters: |map, |select, |selectattr, |reject, |rejectattr, |unique, |sort,
// |dictsort, |join, |first, |last, |list, |reverse, |batch, |min, |max, |sum.
//
// As in jinja2, map/select/reject/unique/batch return single-pass generators and reverse an
// iterator: `|list` materialises them, and `|length` or `|tojson` on them fails as it does there.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "tokenizer/chat_template/access.h"
#include "tokenizer/chat_template/builtins.h"
#include "tokenizer/chat_template/interpreter.h"
#include "tokenizer/chat_template/operators.h"
#include "tokenizer/chat_template/python_format.h"
#include "tokenizer/chat_template/render_error.h"
#include "tokenizer/chat_template/string_methods.h"
#include "tokenizer/chat_template/unicode.h"

namespace inflight::jinja {
namespace {

Value generator(ValueList items) {
  return Value::iterator("generator", std::move(items));
}

// jinja2's make_attrgetter: "a.b.0" looks up item a, then b, then index 0.
class AttrGetter {
 public:
  explicit AttrGetter(const Value& attribute) {
    if (attribute.is_int()) {
      parts_.push_back(attribute);
      return;
    }
    for (const std::string& part : str::split(to_str(attribute), std::string("."), -1)) {
      const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                       [](char c) { return c >= '0' && c <= '9'; });
      if (!digits) {
        parts_.emplace_back(part);
        continue;
      }
      // Beyond 64 bits no list index or realistic key matches: the largest int64 finds nothing.
      errno = 0;
      const long long index = std::strtoll(part.c_str(), nullptr, 10);
      parts_.emplace_back(static_cast<std::int64_t>(errno == ERANGE ? INT64_MAX : index));
    }
  }
  Value operator()(Value item, const Value* fallback = nullptr) const {
    for (const Value& part : parts_) {
      item = get_item(item, part);
      if (fallback != nullptr && item.is_undefined()) item = *fallback;
    }
    return item;
  }

 private:
  ValueList parts_;
};

Value ignore_case(const Value& v) {
  return v.is_string() ? Value(unicode::lower(v.str())) : v;
}

// Key function for sort/min/max/unique: optional (comma-separated) attributes, optional case
// folding of strings.
struct SortKey {
  std::vector<AttrGetter> getters;
  bool case_sensitive = false;
  bool multi = false;
  Value operator()(const Value& item) const {
    if (getters.empty()) return case_sensitive ? item : ignore_case(item);
    if (!multi) return case_sensitive ? getters[0](item) : ignore_case(getters[0](item));
    ValueList keys;
    for (const AttrGetter& g : getters)
      keys.push_back(case_sensitive ? g(item) : ignore_case(g(item)));
    return Value::list(std::move(keys));
  }
};

SortKey make_key(const Value& attribute, bool case_sensitive, bool allow_multi) {
  SortKey key;
  key.case_sensitive = case_sensitive;
  if (attribute.is_none() || attribute.is_undefined()) return key;
  if (allow_multi && attribute.is_string() && attribute.str().find(',') != std::string::npos) {
    key.multi = true;
    for (const std::string& a : str::split(attribute.str(), std::string(","), -1)) {
      key.getters.emplace_back(Value(a));
    }
  } else {
    key.getters.emplace_back(attribute);
  }
  return key;
}

Value f_list(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("list", a, {});
  return Value::list(iterate(v));
}

Value f_first(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("first", a, {});
  if (v.is_iterator() && !v.iter_state().is_view) {
    IterState& it = v.iter_state();
    if (it.position < it.items.size()) return it.items[it.position++];
  } else {
    ValueList items = iterate(v);
    if (!items.empty()) return items.front();
  }
  return Value::undefined("No first item, sequence was empty.");
}

Value f_last(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("last", a, {});
  if (v.is_iterator() && !v.iter_state().is_view) {
    render_fail("'{}' object is not reversible", v.type_name());
  }
  const ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_join(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("join", a, {"d", "attribute"});
  const std::string sep = to_str(p.get_or(0, Value("")));
  const bool by_attr = p.has(1) && !p.get(1).is_none();
  const AttrGetter getter(by_attr ? p.get(1) : Value(0));
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    append_str(out, by_attr ? getter(item) : item);
  }
  return Value(std::move(out));
}

Value f_reverse(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("reverse", a, {});
  if (v.is_string()) {
    ValueList chars = iterate(v);
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->str();
    return Value(std::move(out));
  }
  const bool reversible = !(v.is_iterator() && !v.iter_state().is_view);
  ValueList items = iterate(v);
  std::reverse(items.begin(), items.end());
  if (!reversible) return Value::list(std::move(items));  // list(value) reversed
  const std::string_view kind = v.is_dict() ? "dict_reversekeyiterator" : "list_reverseiterator";
  return Value::iterator(std::string(kind), std::move(items));
}

Value f_map(Interpreter& interp, const Value& v, const CallArgs& a) {
  ValueList out;
  if (a.positional.empty()) {
    const Value* attribute = nullptr;
    const Value* fallback = nullptr;
    for (const auto& [k, val] : a.keyword) {
      if (k == "attribute") {
        attribute = &val;
      } else if (k == "default") {
        fallback = &val;
      } else {
        render_fail("Unexpected keyword argument '{}'", k);
      }
    }
    if (attribute == nullptr) render_fail("map requires a filter argument");
    const AttrGetter getter(*attribute);
    const bool use_default = fallback != nullptr && !fallback->is_none();
    for (const Value& item : iterate(v))
      out.push_back(getter(item, use_default ? fallback : nullptr));
    return generator(std::move(out));
  }
  const std::string name = to_str(a.positional[0]);
  CallArgs rest{{a.positional.begin() + 1, a.positional.end()}, a.keyword};
  for (const Value& item : iterate(v)) out.push_back(interp.apply_filter(name, item, rest));
  return generator(std::move(out));
}

// select / reject / selectattr / rejectattr.
Value select_or_reject(Interpreter& interp, const Value& v, const CallArgs& a, bool by_attr,
                       bool keep) {
  const std::size_t off = by_attr ? 1 : 0;
  if (by_attr && a.positional.empty()) render_fail("Missing parameter for attribute name");
  const AttrGetter getter(by_attr ? a.positional[0] : Value(0));
  const bool has_test = a.positional.size() > off;
  const std::string test = has_test ? to_str(a.positional[off]) : std::string();
  CallArgs rest;
  if (has_test) rest.positional.assign(a.positional.begin() + off + 1, a.positional.end());
  rest.keyword = a.keyword;
  ValueList out;
  if (!v.truthy()) return generator({});
  for (const Value& item : iterate(v)) {
    const Value x = by_attr ? getter(item) : item;
    const bool passed = has_test ? interp.apply_test(test, x, rest) : x.truthy();
    if (passed == keep) out.push_back(item);
  }
  return generator(std::move(out));
}

Value f_select(Interpreter& i, const Value& v, const CallArgs& a) {
  return select_or_reject(i, v, a, false, true);
}
Value f_reject(Interpreter& i, const Value& v, const CallArgs& a) {
  return select_or_reject(i, v, a, false, false);
}
Value f_selectattr(Interpreter& i, const Value& v, const CallArgs& a) {
  return select_or_reject(i, v, a, true, true);
}
Value f_rejectattr(Interpreter& i, const Value& v, const CallArgs& a) {
  return select_or_reject(i, v, a, true, false);
}

Value f_unique(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("unique", a, {"case_sensitive", "attribute"});
  const SortKey key = make_key(p.get_or(1, Value(nullptr)), p.has(0) && p.get(0).truthy(), false);
  ValueList seen, out;
  for (const Value& item : iterate(v)) {
    const Value k = key(item);
    if (k.is_list_or_tuple() || k.is_dict()) render_fail("unhashable type: '{}'", k.type_name());
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
      seen.push_back(k);
      out.push_back(item);
    }
  }
  return generator(std::move(out));
}

// Python sorted(): stable; reverse keeps equal items in their original order.
ValueList sorted(ValueList items, const SortKey& key, bool reverse) {
  std::vector<std::pair<Value, std::size_t>> keyed;
  keyed.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) keyed.emplace_back(key(items[i]), i);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less(y.first, x.first) : less(x.first, y.first);
  });
  ValueList out;
  out.reserve(items.size());
  for (const auto& [k, i] : keyed) out.push_back(std::move(items[i]));
  return out;
}

Value f_sort(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("sort", a, {"reverse", "case_sensitive", "attribute"});
  const SortKey key = make_key(p.get_or(2, Value(nullptr)), p.has(1) && p.get(1).truthy(), true);
  return Value::list(sorted(iterate(v), key, p.has(0) && p.get(0).truthy()));
}

Value f_dictsort(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("dictsort", a, {"case_sensitive", "by", "reverse"});
  const std::string by = to_str(p.get_or(1, Value("key")));
  if (by != "key" && by != "value") render_fail("You can only sort by either \"key\" or \"value\"");
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_dict()) render_fail("'{}' object has no attribute 'items'", v.type_name());
  ValueList pairs;
  for (const auto& [k, val] : v.map()) pairs.push_back(Value::tuple({k, val}));
  const SortKey key = make_key(Value(by == "key" ? 0 : 1), p.has(0) && p.get(0).truthy(), false);
  return Value::list(sorted(std::move(pairs), key, p.has(2) && p.get(2).truthy()));
}

Value min_or_max(const Value& v, const CallArgs& a, bool want_max) {
  ArgParser p(want_max ? "max" : "min", a, {"case_sensitive", "attribute"});
  const SortKey key = make_key(p.get_or(1, Value(nullptr)), p.has(0) && p.get(0).truthy(), false);
  const ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  std::size_t best = 0;
  Value best_key = key(items[0]);
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (want_max ? less(best_key, k) : less(k, best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Value f_max(Interpreter&, const Value& v, const CallArgs& a) {
  return min_or_max(v, a, true);
}
Value f_min(Interpreter&, const Value& v, const CallArgs& a) {
  return min_or_max(v, a, false);
}

Value f_sum(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("sum", a, {"attribute", "start"});
  Value total = p.get_or(1, Value(0));
  const bool by_attr = p.has(0) && !p.get(0).is_none();
  const AttrGetter getter(by_attr ? p.get(0) : Value(0));
  for (const Value& item : iterate(v))
    total = binary_op(BinaryOp::kAdd, total, by_attr ? getter(item) : item);
  return total;
}

Value f_batch(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("batch", a, {"linecount", "fill_with"}, 1);
  if (!p.get(0).is_int() || p.get(0).as_int() <= 0)
    render_fail("batch() linecount must be a positive integer");
  const auto n = static_cast<std::size_t>(p.get(0).as_int());
  ValueList out, row;
  for (Value& item : iterate(v)) {
    if (row.size() == n) {
      out.push_back(Value::list(std::move(row)));
      row.clear();
    }
    row.push_back(std::move(item));
  }
  if (!row.empty()) {
    if (p.has(1) && !p.get(1).is_none()) {
      if (n > kMaxResultSize / sizeof(Value)) render_fail("batch() linecount is too large");
      row.resize(n, p.get(1));
    }
    out.push_back(Value::list(std::move(row)));
  }
  return generator(std::move(out));
}

constexpr std::array<std::pair<std::string_view, FilterFn>, 17> kSequenceFilters = {{
    {"list", f_list},
    {"first", f_first},
    {"last", f_last},
    {"join", f_join},
    {"reverse", f_reverse},
    {"map", f_map},
    {"select", f_select},
    {"reject", f_reject},
    {"selectattr", f_selectattr},
    {"rejectattr", f_rejectattr},
    {"unique", f_unique},
    {"sort", f_sort},
    {"dictsort", f_dictsort},
    {"max", f_max},
    {"min", f_min},
    {"sum", f_sum},
    {"batch", f_batch},
}};

}  // namespace

FilterFn find_sequence_filter(std::string_view name) {
  for (const auto& [n, fn] : kSequenceFilters) {
    if (n == name) return fn;
  }
  return nullptr;
}

}  // namespace inflight::jinja
