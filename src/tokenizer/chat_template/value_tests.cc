// The `is` tests: x is defined, x is string, n is divisibleby(3), ... (jinja2's, same meaning).
#include <array>
#include <utility>

#include "tokenizer/chat_template/builtins.h"
#include "tokenizer/chat_template/interpreter.h"
#include "tokenizer/chat_template/methods.h"
#include "tokenizer/chat_template/operators.h"
#include "tokenizer/chat_template/python_format.h"
#include "tokenizer/chat_template/render_error.h"

namespace inflight::jinja {
namespace {

const Value& operand(const CallArgs& args, std::string_view test) {
  ArgParser p(test, args, {"other"}, 1);
  return p.get(0);
}

void no_args(const CallArgs& args, std::string_view test) {
  ArgParser p(test, args, {});
}

bool t_defined(Interpreter&, const Value& v, const CallArgs& a) {
  no_args(a, "defined");
  return !v.is_undefined();
}
bool t_undefined(Interpreter&, const Value& v, const CallArgs& a) {
  no_args(a, "undefined");
  return v.is_undefined();
}
bool t_none(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_none();
}
bool t_boolean(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_bool();
}
bool t_true(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_bool() && v.as_bool();
}
bool t_false(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_bool() && !v.as_bool();
}
bool t_integer(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_int();
}
bool t_float(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_float();
}
bool t_number(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_number();
}
bool t_string(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_string();
}
bool t_mapping(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_dict();
}
bool t_callable(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_callable() || v.is_undefined();  // jinja2's Undefined defines __call__
}
// iter(x) works: str, list, tuple, dict, iterators, and Undefined (iterates as empty).
bool t_iterable(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_string() || v.is_list_or_tuple() || v.is_dict() || v.is_iterator() ||
         v.is_undefined();
}
// len(x) and x[i] work: str, list, tuple, dict, and Undefined.
bool t_sequence(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_string() || v.is_list_or_tuple() || v.is_dict() || v.is_undefined();
}
bool t_odd(Interpreter&, const Value& v, const CallArgs&) {
  return equals(binary_op(BinaryOp::kMod, v, Value(2)), Value(1));
}
bool t_even(Interpreter&, const Value& v, const CallArgs&) {
  return equals(binary_op(BinaryOp::kMod, v, Value(2)), Value(0));
}
bool t_divisibleby(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("divisibleby", a, {"num"}, 1);
  return equals(binary_op(BinaryOp::kMod, v, p.get(0)), Value(0));
}
bool t_eq(Interpreter&, const Value& v, const CallArgs& a) {
  return equals(v, operand(a, "eq"));
}
bool t_ne(Interpreter&, const Value& v, const CallArgs& a) {
  return !equals(v, operand(a, "ne"));
}
bool t_lt(Interpreter&, const Value& v, const CallArgs& a) {
  return compare(CompareOp::kLt, v, operand(a, "lt"));
}
bool t_le(Interpreter&, const Value& v, const CallArgs& a) {
  return compare(CompareOp::kLe, v, operand(a, "le"));
}
bool t_gt(Interpreter&, const Value& v, const CallArgs& a) {
  return compare(CompareOp::kGt, v, operand(a, "gt"));
}
bool t_ge(Interpreter&, const Value& v, const CallArgs& a) {
  return compare(CompareOp::kGe, v, operand(a, "ge"));
}
bool t_in(Interpreter&, const Value& v, const CallArgs& a) {
  ArgParser p("in", a, {"seq"}, 1);
  return contains(p.get(0), v);
}
// Python `is`: identity for shared objects; None, booleans and equal small scalars are
// singletons or interned there too.
bool t_sameas(Interpreter&, const Value& v, const CallArgs& a) {
  const Value& other = operand(a, "sameas");
  if (v.kind() != other.kind()) return false;
  if (v.identity() != nullptr) return v.identity() == other.identity();
  if (v.is_undefined()) return false;
  return equals(v, other);
}
bool t_lower(Interpreter& interp, const Value& v, const CallArgs&) {
  return call_method(interp, Value(to_str(v)), "islower", {}).as_bool();
}
bool t_upper(Interpreter& interp, const Value& v, const CallArgs&) {
  return call_method(interp, Value(to_str(v)), "isupper", {}).as_bool();
}
bool t_escaped(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_markup();  // has __html__
}
bool t_filter(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_string() && find_filter(v.str()) != nullptr;
}
bool t_test(Interpreter&, const Value& v, const CallArgs&) {
  return v.is_string() && find_test(v.str()) != nullptr;
}

constexpr std::array<std::pair<std::string_view, TestFn>, 39> kTests = {{
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"boolean", t_boolean},
    {"true", t_true},
    {"false", t_false},
    {"integer", t_integer},
    {"float", t_float},
    {"number", t_number},
    {"string", t_string},
    {"mapping", t_mapping},
    {"callable", t_callable},
    {"iterable", t_iterable},
    {"sequence", t_sequence},
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"==", t_eq},
    {"ne", t_ne},
    {"!=", t_ne},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<", t_lt},
    {"le", t_le},
    {"<=", t_le},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {">", t_gt},
    {"ge", t_ge},
    {">=", t_ge},
    {"in", t_in},
    {"sameas", t_sameas},
    {"lower", t_lower},
    {"upper", t_upper},
    {"escaped", t_escaped},
    {"filter", t_filter},
    {"test", t_test},
}};

}  // namespace

TestFn find_test_impl(std::string_view name) {
  for (const auto& [n, fn] : kTests) {
    if (n == name) return fn;
  }
  return nullptr;
}

}  // namespace inflight::jinja
