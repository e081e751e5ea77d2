#include "tokenizer/chat_template/value.h"

#include <algorithm>

#include "tokenizer/chat_template/render_error.h"
#include "tokenizer/chat_template/unicode.h"

namespace inflight::jinja {

const Value* ValueMap::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : entries_) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* ValueMap::find(std::string_view key) const {
  for (const auto& [k, v] : entries_) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

void ValueMap::set(Value key, Value value) {
  for (auto& [k, v] : entries_) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

void ValueMap::append_new(Value key, Value value) {
  entries_.emplace_back(std::move(key), std::move(value));
}

void check_hashable(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kList:
    case Value::Kind::kDict:
    case Value::Kind::kIterator:
      if (!(key.is_iterator() && !key.iter_state().is_view)) {
        render_fail("unhashable type: '{}'", key.type_name());
      }
      return;
    case Value::Kind::kTuple:
      for (const Value& item : key.items()) check_hashable(item);
      return;
    default:
      return;
  }
}

Value Value::undefined(std::string hint, bool unsafe) {
  Value v;
  v.data_ = std::make_shared<const UndefinedInfo>(UndefinedInfo{std::move(hint), unsafe});
  return v;
}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}

namespace {

std::uint32_t nested_depth(std::uint32_t deepest_child) {
  if (deepest_child >= kMaxNesting) {
    render_fail("value nested more than {} levels deep", kMaxNesting);
  }
  return deepest_child + 1;
}

std::uint32_t deepest(const ValueList& items) {
  std::uint32_t d = 0;
  for (const Value& v : items) d = std::max(d, v.depth());
  return d;
}

}  // namespace

Value Value::list(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  const std::uint32_t depth = nested_depth(deepest(items));
  v.data_ = std::make_shared<const ListData>(ListData{std::move(items), depth});
  return v;
}

Value Value::tuple(ValueList items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

Value Value::dict(ValueMap map) {
  std::uint32_t d = 0;
  for (const auto& [k, val] : map) d = std::max({d, k.depth(), val.depth()});
  map.depth_ = nested_depth(d);
  Value v;
  v.kind_ = Kind::kDict;
  v.data_ = std::make_shared<const ValueMap>(std::move(map));
  return v;
}

Value Value::new_namespace(ValueMap attrs, bool assignable) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.data_ = std::make_shared<Namespace>(Namespace{std::move(attrs), assignable});
  return v;
}

Value Value::callable(std::string name, std::function<Value(Interpreter&, const CallArgs&)> fn,
                      const Value* holds) {
  Value v;
  v.kind_ = Kind::kCallable;
  const std::uint32_t depth = holds != nullptr ? nested_depth(holds->depth()) : 0;
  v.data_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn), depth});
  return v;
}

Value Value::iterator(std::string type_name, ValueList items, bool is_view) {
  Value v;
  v.kind_ = Kind::kIterator;
  const std::uint32_t depth = nested_depth(deepest(items));
  v.data_ = std::make_shared<IterState>(
      IterState{std::move(items), 0, std::move(type_name), is_view, depth});
  return v;
}

double Value::as_double() const {
  switch (kind_) {
    case Kind::kFloat:
      return std::get<double>(data_);
    case Kind::kInt:
      return static_cast<double>(as_int());
    case Kind::kBool:
      return as_bool() ? 1.0 : 0.0;
    default:
      render_fail("expected a number, got {}", type_name());
  }
}

std::uint32_t Value::depth() const {
  switch (kind_) {
    case Kind::kList:
    case Kind::kTuple:
      return std::get<std::shared_ptr<const ListData>>(data_)->depth;
    case Kind::kDict:
      return map().depth();
    case Kind::kCallable:
      return callable().depth;
    case Kind::kIterator:
      return iter_state().depth;
    default:
      return 0;
  }
}

const UndefinedInfo* Value::undefined_info() const {
  const auto* p = std::get_if<std::shared_ptr<const UndefinedInfo>>(&data_);
  return p != nullptr ? p->get() : nullptr;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return std::get<double>(data_) != 0.0;
    case Kind::kString:
      return !str().empty();
    case Kind::kList:
    case Kind::kTuple:
      return !items().empty();
    case Kind::kDict:
      return !map().empty();
    case Kind::kNamespace:
    case Kind::kCallable:
      return true;
    case Kind::kIterator:
      return !iter_state().is_view || !iter_state().items.empty();
  }
  return false;
}

std::string_view Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
    case Kind::kIterator:
      return iter_state().type_name;
  }
  return "object";
}

const void* Value::identity() const {
  switch (kind_) {
    case Kind::kList:
    case Kind::kTuple:
      return &items();
    case Kind::kDict:
      return &map();
    case Kind::kNamespace:
      return &ns();
    case Kind::kCallable:
      return &callable();
    case Kind::kIterator:
      return &iter_state();
    default:
      return nullptr;
  }
}

ValueList iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return value.items();
    case Value::Kind::kDict: {
      ValueList keys;
      keys.reserve(value.map().size());
      for (const auto& [k, v] : value.map()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kIterator: {
      IterState& it = value.iter_state();
      if (it.is_view) return it.items;
      ValueList rest(it.items.begin() + static_cast<std::ptrdiff_t>(it.position), it.items.end());
      it.position = it.items.size();
      return rest;
    }
    case Value::Kind::kString: {
      ValueList chars;
      const std::string& s = value.str();
      for (std::size_t i = 0; i < s.size();) {
        const std::size_t start = i;
        unicode::decode(s, i);
        chars.emplace_back(s.substr(start, i - start));
      }
      return chars;
    }
    default:
      render_fail("'{}' object is not iterable", value.type_name());
  }
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_integer() == b.as_integer();
  }
  using Kind = Value::Kind;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList:
    case Kind::kTuple: {
      const ValueList& x = a.items();
      const ValueList& y = b.items();
      return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin(), equals);
    }
    case Kind::kDict: {
      if (a.map().size() != b.map().size()) return false;
      for (const auto& [k, v] : a.map()) {
        const Value* other = b.map().find(k);
        if (other == nullptr || !equals(v, *other)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_integer() < b.as_integer();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order = code point order
  if (a.kind() == b.kind() && a.is_list_or_tuple()) {
    const ValueList& x = a.items();
    const ValueList& y = b.items();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  render_fail("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name());
}

void fail_undefined(const Value& value) {
  const UndefinedInfo* info = value.undefined_info();
  if (info == nullptr) throw RenderError(RenderError::Kind::kUndefined, "value is undefined");
  throw RenderError(info->unsafe ? RenderError::Kind::kSecurity : RenderError::Kind::kUndefined,
                    info->hint);
}

}  // namespace inflight::jinja
