#include "tokenizer/chat_template/operators.h"

#include <cmath>
#include <limits>

#include "tokenizer/chat_template/markup.h"
#include "tokenizer/chat_template/percent_format.h"
#include "tokenizer/chat_template/render_error.h"

namespace inflight::jinja {
namespace {

std::string_view symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "//";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kPow:
      return "** or pow()";
    default:
      return "?";
  }
}

[[noreturn]] void unsupported_operands(BinaryOp op, const Value& a, const Value& b) {
  render_fail("unsupported operand type(s) for {}: '{}' and '{}'", symbol(op), a.type_name(),
              b.type_name());
}

bool is_integral(const Value& v) {
  return v.is_int() || v.is_bool();
}

void check_overflow(bool overflow) {
  if (overflow) render_fail("integer overflow (values beyond 64 bits are not supported)");
}

Value repeat(const Value& seq, std::int64_t n) {
  if (n <= 0)
    return seq.is_string()                     ? Value(std::string())
           : seq.kind() == Value::Kind::kTuple ? Value::tuple({})
                                               : Value::list({});
  const std::size_t unit = seq.is_string() ? seq.str().size() : seq.items().size();
  if (unit != 0 && static_cast<std::size_t>(n) > kMaxResultSize / unit) {
    render_fail("result of repetition is too large");
  }
  if (seq.is_string()) {
    std::string out;
    out.reserve(unit * static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) out += seq.str();
    return same_kind(seq, std::move(out));
  }
  ValueList out;
  for (std::int64_t i = 0; i < n; ++i)
    out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.kind() == Value::Kind::kTuple ? Value::tuple(std::move(out))
                                           : Value::list(std::move(out));
}

Value add(const Value& a, const Value& b) {
  if (a.is_string() && b.is_string() && (a.is_markup() || b.is_markup())) {
    // Markup.__add__ / __radd__ escape the plain str operand.
    std::string s = a.is_markup() ? a.str() : html_escape(a.str());
    s += b.is_markup() ? b.str() : html_escape(b.str());
    if (s.size() > kMaxResultSize) render_fail("string is too large");
    return Value::markup(std::move(s));
  }
  if (a.is_string() && b.is_string()) {
    if (a.str().size() + b.str().size() > kMaxResultSize) render_fail("string is too large");
    return Value(a.str() + b.str());
  }
  if (a.is_list_or_tuple() && a.kind() == b.kind()) {
    ValueList out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return a.kind() == Value::Kind::kTuple ? Value::tuple(std::move(out))
                                           : Value::list(std::move(out));
  }
  if (a.is_string()) render_fail("can only concatenate str (not \"{}\") to str", b.type_name());
  if (a.kind() == Value::Kind::kList) {
    render_fail("can only concatenate list (not \"{}\") to list", b.type_name());
  }
  unsupported_operands(BinaryOp::kAdd, a, b);
}

double python_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0.0) {
    if ((b < 0) != (m < 0)) m += b;
  } else {
    m = std::copysign(0.0, b);
  }
  return m;
}

// CPython's float floor division.
double python_floordiv(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floor_div = std::floor(div);
  if (div - floor_div > 0.5) floor_div += 1.0;
  return floor_div;
}

}  // namespace

Value binary_op(BinaryOp op, const Value& a, const Value& b) {
  if (op == BinaryOp::kMod && a.is_string()) {
    if (!a.is_markup()) return Value(percent_format(a.str(), b));
    // Markup % args escapes the str arguments.
    Value args = b;
    if (b.kind() == Value::Kind::kTuple) {
      ValueList escaped;
      for (const Value& v : b.items()) escaped.push_back(v.is_string() ? escape_to_markup(v) : v);
      args = Value::tuple(std::move(escaped));
    } else if (b.is_string()) {
      args = escape_to_markup(b);
    }
    return Value::markup(percent_format(a.str(), args));
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (op == BinaryOp::kAdd && !(a.is_number() && b.is_number())) return add(a, b);
  if (op == BinaryOp::kMul) {
    if ((a.is_string() || a.is_list_or_tuple()) && is_integral(b)) return repeat(a, b.as_integer());
    if ((b.is_string() || b.is_list_or_tuple()) && is_integral(a)) return repeat(b, a.as_integer());
  }
  if (!a.is_number() || !b.is_number()) unsupported_operands(op, a, b);

  if (is_integral(a) && is_integral(b) && op != BinaryOp::kDiv) {
    const std::int64_t x = a.as_integer();
    const std::int64_t y = b.as_integer();
    std::int64_t r = 0;
    switch (op) {
      case BinaryOp::kAdd:
        check_overflow(__builtin_add_overflow(x, y, &r));
        return Value(r);
      case BinaryOp::kSub:
        check_overflow(__builtin_sub_overflow(x, y, &r));
        return Value(r);
      case BinaryOp::kMul:
        check_overflow(__builtin_mul_overflow(x, y, &r));
        return Value(r);
      case BinaryOp::kFloorDiv:
      case BinaryOp::kMod: {
        if (y == 0) render_fail("integer division or modulo by zero");
        check_overflow(x == std::numeric_limits<std::int64_t>::min() && y == -1);
        std::int64_t q = x / y;
        std::int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value(op == BinaryOp::kFloorDiv ? q : m);
      }
      case BinaryOp::kPow: {
        if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
        std::int64_t result = 1;
        for (std::int64_t i = 0; i < y; ++i) {
          check_overflow(__builtin_mul_overflow(result, x, &result));
          if (result == 0 || result == 1) break;  // 0**n and 1**n settle at once
        }
        if (x == -1) result = (y % 2 == 0) ? 1 : -1;
        return Value(result);
      }
      default:
        break;
    }
  }
  const double x = a.as_double();
  const double y = b.as_double();
  switch (op) {
    case BinaryOp::kAdd:
      return Value(x + y);
    case BinaryOp::kSub:
      return Value(x - y);
    case BinaryOp::kMul:
      return Value(x * y);
    case BinaryOp::kDiv:
      if (y == 0.0 && is_integral(b)) render_fail("division by zero");
      if (y == 0.0) render_fail("float division by zero");
      return Value(x / y);
    case BinaryOp::kFloorDiv:
      if (y == 0.0) render_fail("float floor division by zero");
      return Value(python_floordiv(x, y));
    case BinaryOp::kMod:
      if (y == 0.0) render_fail("float modulo");
      return Value(python_fmod(x, y));
    case BinaryOp::kPow:
      if (x == 0.0 && y < 0) render_fail("0.0 cannot be raised to a negative power");
      return Value(std::pow(x, y));
    default:
      render_fail("bad arithmetic operator");
  }
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_float()) return Value(-v.as_double());
  if (is_integral(v)) {
    std::int64_t r = 0;
    check_overflow(__builtin_sub_overflow(std::int64_t{0}, v.as_integer(), &r));
    return Value(r);
  }
  render_fail("bad operand type for unary -: '{}'", v.type_name());
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_float()) return v;
  if (is_integral(v)) return Value(v.as_integer());
  render_fail("bad operand type for unary +: '{}'", v.type_name());
}

bool compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEq:
      return equals(a, b);
    case CompareOp::kNe:
      return !equals(a, b);
    case CompareOp::kLt:
      return less(a, b);
    case CompareOp::kGt:
      return less(b, a);
    case CompareOp::kLe:
      return less(a, b) || equals(a, b);
    case CompareOp::kGe:
      return less(b, a) || equals(a, b);
    case CompareOp::kIn:
      return contains(b, a);
    case CompareOp::kNotIn:
      return !contains(b, a);
  }
  return false;
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;  // iterating an undefined yields nothing
    case Value::Kind::kString:
      if (!item.is_string()) {
        render_fail("'in <string>' requires string as left operand, not {}", item.type_name());
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const Value& v : container.items()) {
        if (equals(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      check_hashable(item);
      return container.map().find(item) != nullptr;
    case Value::Kind::kIterator:
      for (const Value& v : iterate(container)) {
        if (equals(v, item)) return true;
      }
      return false;
    default:
      render_fail("argument of type '{}' is not iterable", container.type_name());
  }
}

}  // namespace inflight::jinja
