// Value: what a template computes with. Mirrors the Python objects jinja2 templates see:
// Undefined, None, bool, int, float, str, list, tuple, dict (insertion-ordered), namespace and
// callables (macros, bound methods, globals).
//
// Strings, lists, tuples and dicts are immutable and shared (copying a Value is cheap, as
// passing a Python object is: templates read the same message content many times). The sandbox
// transformers uses (ImmutableSandboxedEnvironment) forbids mutating them, so only namespace()
// objects change after creation, through `{% set ns.attr = ... %}`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace inflight::jinja {

class Value;
class Interpreter;
struct CallArgs;

using ValueList = std::vector<Value>;

// Containers nest at most this deep. Deeper values would make printing, comparison and even
// destruction recurse without bound; Python's own recursion limit stops templates far earlier.
inline constexpr std::uint32_t kMaxNesting = 512;

// Strings, lists and the output larger than this are refused (repetition, padding, indents):
// a template must not be able to exhaust the server's memory.
inline constexpr std::size_t kMaxResultSize = std::size_t{64} << 20;

struct ListData;
class ValueMap;
struct Namespace;
struct Callable;
struct IterState;
struct UndefinedInfo;

class Value {
 public:
  enum class Kind : std::uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kNamespace,
    kCallable,
    kIterator
  };

  Value() = default;  // undefined, no hint
  Value(std::nullptr_t) : kind_(Kind::kNone) {}
  Value(bool b) : kind_(Kind::kBool), data_(b) {}
  Value(int i) : Value(static_cast<std::int64_t>(i)) {}
  Value(std::int64_t i) : kind_(Kind::kInt), data_(i) {}
  Value(double d) : kind_(Kind::kFloat), data_(d) {}
  Value(std::string s)
      : kind_(Kind::kString), data_(std::make_shared<const std::string>(std::move(s))) {}
  Value(std::string_view s) : Value(std::string(s)) {}
  Value(const char* s) : Value(std::string(s)) {}

  static Value undefined(std::string hint, bool unsafe = false);
  // markupsafe.Markup: a str marked safe (|safe, |escape). Concatenating a plain str to it with
  // `+` HTML-escapes the plain one, as in Python; otherwise it behaves as a str.
  static Value markup(std::string s);
  static Value list(ValueList items);
  static Value tuple(ValueList items);
  static Value dict(ValueMap map);
  static Value new_namespace(ValueMap attrs, bool assignable = true);
  // `holds`: a value the function keeps (a bound method's receiver), for the nesting bound.
  static Value callable(std::string name, std::function<Value(Interpreter&, const CallArgs&)> fn,
                        const Value* holds = nullptr);
  // A single-pass iterator ("generator", "list_reverseiterator") or a dict view ("dict_items").
  static Value iterator(std::string type_name, ValueList items, bool is_view = false);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // int, float or bool (Python's bool is an int).
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && markup_; }
  bool is_list_or_tuple() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_iterator() const { return kind_ == Kind::kIterator; }

  bool as_bool() const { return std::get<bool>(data_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(data_); }
  // bool and int as int64 (only for is_bool() || is_int()).
  std::int64_t as_integer() const { return is_bool() ? as_bool() : as_int(); }
  // Any number as a double.
  double as_double() const;
  const std::string& str() const { return *std::get<std::shared_ptr<const std::string>>(data_); }
  const ValueList& items() const;
  const ValueMap& map() const { return *std::get<std::shared_ptr<const ValueMap>>(data_); }
  Namespace& ns() const { return *std::get<std::shared_ptr<Namespace>>(data_); }
  const Callable& callable() const { return *std::get<std::shared_ptr<const Callable>>(data_); }
  IterState& iter_state() const { return *std::get<std::shared_ptr<IterState>>(data_); }
  const UndefinedInfo* undefined_info() const;

  // Python truthiness: undefined, None, False, 0, 0.0, "", [], () and {} are false.
  bool truthy() const;
  // Python's type name, as error messages print it ("str", "dict", "NoneType", ...).
  std::string_view type_name() const;
  // The identity of a shared list/dict/namespace/callable (for `is sameas`), else nullptr.
  const void* identity() const;
  // Container nesting: 0 for scalars and namespaces, 1 + the deepest element for containers.
  std::uint32_t depth() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool markup_ = false;  // only for kString
  std::variant<std::monostate, bool, std::int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<const ListData>, std::shared_ptr<const ValueMap>,
               std::shared_ptr<Namespace>, std::shared_ptr<const Callable>,
               std::shared_ptr<IterState>, std::shared_ptr<const UndefinedInfo>>
      data_;
};

// A Python dict: insertion-ordered, unique keys. Keys are hashable values (str, int, float,
// bool, None, tuples of those); equal keys (1, 1.0, True) share one entry, as in Python.
class ValueMap {
 public:
  using Entry = std::pair<Value, Value>;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  const Value* find(const std::string& key) const { return find(std::string_view(key)); }
  const Value* find(const char* key) const { return find(std::string_view(key)); }
  // Replaces the value of an existing key in place (keeping its position) or appends.
  void set(Value key, Value value);
  // Appends a key known not to be present yet (JSON objects, the loop object).
  void append_new(Value key, Value value);

  std::size_t size() const { return entries_.size(); }
  std::uint32_t depth() const { return depth_; }  // set when frozen into a Value
  bool empty() const { return entries_.empty(); }
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }

 private:
  friend class Value;
  std::vector<Entry> entries_;
  std::uint32_t depth_ = 0;
};

struct Callable {
  std::string name;  // for messages, e.g. "macro 'render_tool'" or "str.strip"
  std::function<Value(Interpreter&, const CallArgs&)> fn;
  std::uint32_t depth = 0;  // nesting of the values fn holds (a bound method's receiver)
};

// jinja2's namespace(): attribute bag that `{% set ns.attr = value %}` may change. Also the
// read-only `loop` object of for-loops (assignable = false), which is no mapping either.
struct Namespace {
  ValueMap attrs;
  bool assignable = true;
};

// A Python iterator or dict view, as some filters and methods return them:
//   generator (select, map, unique, ...), list_reverseiterator (reverse): single pass, no len(),
//     always true, not JSON serializable;
//   dict_items / dict_keys / dict_values (dict.items() ...): re-iterable, sized, falsy if empty.
struct IterState {
  ValueList items;
  std::size_t position = 0;  // items before it were consumed (single-pass iterators only)
  std::string type_name;
  bool is_view = false;
  std::uint32_t depth = 0;
};

// A list or tuple's items and how deeply they nest.
struct ListData {
  ValueList items;
  std::uint32_t depth = 0;
};

// Why a value is undefined, for the error raised when it is used.
struct UndefinedInfo {
  std::string hint;     // e.g. "'tools' is undefined", "'dict object' has no attribute 'x'"
  bool unsafe = false;  // the sandbox refused an attribute: any use is a security error
};

inline const ValueList& Value::items() const {
  return std::get<std::shared_ptr<const ListData>>(data_)->items;
}

// Python iter(): list/tuple items, dict keys, str code points, nothing for undefined, the
// remaining items of an iterator (consuming them); a type error for anything else ("'int' object
// is not iterable").
ValueList iterate(const Value& value);

// Throws Python's "unhashable type" error for keys a dict cannot hold (list, dict, ...).
void check_hashable(const Value& key);

// Python ==. Numbers compare by value across int/float/bool; lists and tuples never equal each
// other; undefined equals only undefined.
bool equals(const Value& a, const Value& b);

// Python <, for sort and comparisons. Throws a type error (as Python does) for unorderable
// pairs, e.g. int < str or dict < dict.
bool less(const Value& a, const Value& b);

}  // namespace inflight::jinja
