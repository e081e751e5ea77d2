#include "tokenizer/chat_template/access.h"

#include "tokenizer/chat_template/markup.h"
#include "tokenizer/chat_template/methods.h"
#include "tokenizer/chat_template/python_format.h"
#include "tokenizer/chat_template/render_error.h"
#include "tokenizer/chat_template/unicode.h"

namespace inflight::jinja {
namespace {

Value no_attribute(const Value& object, std::string_view name) {
  if (object.is_none()) return Value::undefined(fmt::format("'None' has no attribute '{}'", name));
  return Value::undefined(
      fmt::format("'{} object' has no attribute '{}'", object.type_name(), name));
}

Value no_element(const Value& object, const Value& key) {
  return Value::undefined(
      fmt::format("'{} object' has no element {}", object.type_name(), to_repr(key)));
}

// The i-th code point of s (Python negative indexing), or undefined.
Value string_index(const Value& object, std::int64_t i) {
  const std::string& s = object.str();
  const auto n = static_cast<std::int64_t>(unicode::length(s));
  if (i < 0) i += n;
  if (i < 0 || i >= n) return no_element(object, Value(i));
  std::size_t b = unicode::byte_offset(s, static_cast<std::size_t>(i));
  std::size_t e = b;
  unicode::decode(s, e);
  return same_kind(object, s.substr(b, e - b));
}

std::optional<std::int64_t> slice_index(const Value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (v.is_int() || v.is_bool()) return v.as_integer();
  render_fail("slice indices must be integers or None or have an __index__ method");
}

}  // namespace

Value get_attr(const Value& object, std::string_view name) {
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      fail_undefined(object);
    case Value::Kind::kDict:
      if (find_method(object, name) != MethodLookup::kMissing) return method_value(object, name);
      if (const Value* v = object.map().find(name)) return *v;
      return no_attribute(object, name);
    case Value::Kind::kString:
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      if (!name.empty() && name[0] == '_') {
        return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.",
                                            name, object.type_name()),
                                true);
      }
      return method_value(object, name);
    case Value::Kind::kNamespace:
      if (const Value* v = object.ns().attrs.find(name)) return *v;
      return no_attribute(object, name);
    default:
      return no_attribute(object, name);
  }
}

Value get_item(const Value& object, const Value& key) {
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      fail_undefined(object);
    case Value::Kind::kDict:
      if (key.is_list_or_tuple() || key.is_dict() || key.is_undefined()) {
        if (key.is_undefined()) fail_undefined(key);
        check_hashable(key);
      }
      if (const Value* v = object.map().find(key)) return *v;
      if (key.is_string()) {
        if (find_method(object, key.str()) != MethodLookup::kMissing) {
          return method_value(object, key.str());
        }
        return no_attribute(object, key.str());
      }
      return no_element(object, key);
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      if (key.is_int() || key.is_bool()) {
        const ValueList& items = object.items();
        std::int64_t i = key.as_integer();
        if (i < 0) i += static_cast<std::int64_t>(items.size());
        if (i < 0 || i >= static_cast<std::int64_t>(items.size())) return no_element(object, key);
        return items[static_cast<std::size_t>(i)];
      }
      if (key.is_string()) return get_attr(object, key.str());
      return no_element(object, key);
    }
    case Value::Kind::kString:
      if (key.is_int() || key.is_bool()) return string_index(object, key.as_integer());
      if (key.is_string()) return get_attr(object, key.str());
      return no_element(object, key);
    case Value::Kind::kNamespace:
      if (key.is_string()) {
        if (const Value* v = object.ns().attrs.find(key.str())) return *v;
      }
      return no_element(object, key);
    default:
      return no_element(object, key);
  }
}

Value get_slice(const Value& object, const Value& start_v, const Value& stop_v,
                const Value& step_v) {
  if (object.is_undefined()) fail_undefined(object);
  if (!object.is_string() && !object.is_list_or_tuple()) {
    return Value::undefined(fmt::format("'{} object' cannot be sliced", object.type_name()));
  }
  const std::int64_t step = slice_index(step_v).value_or(1);
  if (step == 0) render_fail("slice step cannot be zero");

  // Code points for strings, items for sequences.
  std::vector<std::string> chars;
  if (object.is_string()) {
    const std::string& s = object.str();
    for (std::size_t i = 0; i < s.size();) {
      const std::size_t b = i;
      unicode::decode(s, i);
      chars.push_back(s.substr(b, i - b));
    }
  }
  const auto n =
      static_cast<std::int64_t>(object.is_string() ? chars.size() : object.items().size());
  auto adjust = [&](std::optional<std::int64_t> v, std::int64_t fallback) {
    if (!v) return fallback;
    std::int64_t i = *v;
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  const std::int64_t start = adjust(slice_index(start_v), step < 0 ? n - 1 : 0);
  const std::int64_t stop = adjust(slice_index(stop_v), step < 0 ? -1 : n);

  std::string out_str;
  ValueList out_items;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (object.is_string()) {
      out_str += chars[static_cast<std::size_t>(i)];
    } else {
      out_items.push_back(object.items()[static_cast<std::size_t>(i)]);
    }
    if (__builtin_add_overflow(i, step, &i)) break;  // a huge step jumps past the end
  }
  if (object.is_string()) return same_kind(object, std::move(out_str));
  return object.kind() == Value::Kind::kTuple ? Value::tuple(std::move(out_items))
                                              : Value::list(std::move(out_items));
}

}  // namespace inflight::jinja
