// Expression half of the Parser (see parser.h for the grammar).
#include "core/check.h"
#include "tokenizer/chat_template/builtins.h"
#include "tokenizer/chat_template/parser.h"

namespace inflight::jinja {
namespace {

template <typename Node>
ExprPtr make(int line, Node node) {
  auto e = std::make_unique<Expr>();
  e->line = line;
  e->node = std::move(node);
  return e;
}

ExprPtr binary(int line, BinaryOp op, ExprPtr left, ExprPtr right) {
  return make(line, BinaryExpr{op, std::move(left), std::move(right)});
}

}  // namespace

void Parser::note_name_load(const std::string& name) {
  if (name == "loop" && frames_.back().loop_used != nullptr) *frames_.back().loop_used = true;
  MacroDef* macro = frames_.back().macro;
  if (macro == nullptr) return;
  if (name == "varargs") macro->uses_varargs = true;
  if (name == "kwargs") macro->uses_kwargs = true;
  if (name == "caller") macro->uses_caller = true;
}

void Parser::note_unknown(int line, std::string what) {
  unknown_.push_back(UnknownName{line, std::move(what), frames_.back().soft});
}

bool Parser::is_tuple_end(std::string_view extra_end) const {
  if (cur().type == TokenType::kVariableEnd || cur().type == TokenType::kBlockEnd) return true;
  if (at_op(")")) return true;
  return !extra_end.empty() && at_name(extra_end);
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_tuple(bool with_condexpr, std::string_view extra_end, bool explicit_parens) {
  const int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    items.push_back(parse_expression(with_condexpr));
    if (!at_op(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) unexpected("an expression");
  }
  return make(line, ListExpr{std::move(items), true});
}

ExprPtr Parser::parse_condexpr() {
  DepthGuard guard(*this);
  const int line = cur().line;
  const std::size_t first_unknown = unknown_.size();
  ExprPtr expr = parse_or();
  while (skip_name("if")) {
    ExprPtr test = parse_or();
    ExprPtr otherwise = skip_name("else") ? parse_condexpr() : nullptr;
    expr = make(line, CondExpr{std::move(test), std::move(expr), std::move(otherwise)});
    // jinja2 compiles all parts of an inline if in a soft frame.
    for (std::size_t i = first_unknown; i < unknown_.size(); ++i) unknown_[i].soft = true;
  }
  return expr;
}

ExprPtr Parser::parse_or() {
  const int line = cur().line;
  ExprPtr left = parse_and();
  while (skip_name("or")) left = binary(line, BinaryOp::kOr, std::move(left), parse_and());
  return left;
}

ExprPtr Parser::parse_and() {
  const int line = cur().line;
  ExprPtr left = parse_not();
  while (skip_name("and")) left = binary(line, BinaryOp::kAnd, std::move(left), parse_not());
  return left;
}

ExprPtr Parser::parse_not() {
  DepthGuard guard(*this);
  if (at_name("not")) {
    const int line = next().line;
    return make(line, UnaryExpr{UnaryOp::kNot, parse_not()});
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const int line = cur().line;
  ExprPtr first = parse_math1();
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
  static const std::pair<std::string_view, CompareOp> kOps[] = {
      {"==", CompareOp::kEq}, {"!=", CompareOp::kNe}, {"<", CompareOp::kLt},
      {"<=", CompareOp::kLe}, {">", CompareOp::kGt},  {">=", CompareOp::kGe}};
  while (true) {
    bool matched = false;
    for (const auto& [text, op] : kOps) {
      if (at_op(text)) {
        next();
        rest.emplace_back(op, parse_math1());
        matched = true;
        break;
      }
    }
    if (matched) continue;
    if (skip_name("in")) {
      rest.emplace_back(CompareOp::kIn, parse_math1());
    } else if (at_name("not") && look().type == TokenType::kName && look().text == "in") {
      next();
      next();
      rest.emplace_back(CompareOp::kNotIn, parse_math1());
    } else {
      break;
    }
  }
  if (rest.empty()) return first;
  return make(line, CompareExpr{std::move(first), std::move(rest)});
}

ExprPtr Parser::parse_math1() {
  const int line = cur().line;
  ExprPtr left = parse_concat();
  while (at_op("+") || at_op("-")) {
    const BinaryOp op = next().text == "+" ? BinaryOp::kAdd : BinaryOp::kSub;
    left = binary(line, op, std::move(left), parse_concat());
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const int line = cur().line;
  std::vector<ExprPtr> parts;
  parts.push_back(parse_math2());
  while (skip_op("~")) parts.push_back(parse_math2());
  if (parts.size() == 1) return std::move(parts[0]);
  return make(line, ConcatExpr{std::move(parts)});
}

ExprPtr Parser::parse_math2() {
  const int line = cur().line;
  ExprPtr left = parse_pow();
  while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
    const std::string op = next().text;
    const BinaryOp kind = op == "*"    ? BinaryOp::kMul
                          : op == "/"  ? BinaryOp::kDiv
                          : op == "//" ? BinaryOp::kFloorDiv
                                       : BinaryOp::kMod;
    left = binary(line, kind, std::move(left), parse_pow());
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  const int line = cur().line;
  ExprPtr left = parse_unary(true);
  while (skip_op("**")) left = binary(line, BinaryOp::kPow, std::move(left), parse_unary(true));
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  const int line = cur().line;
  ExprPtr node;
  if (skip_op("-")) {
    node = make(line, UnaryExpr{UnaryOp::kNeg, parse_unary(false)});
  } else if (skip_op("+")) {
    node = make(line, UnaryExpr{UnaryOp::kPos, parse_unary(false)});
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  const int line = t.line;
  switch (t.type) {
    case TokenType::kName: {
      const std::string name = next().text;
      if (name == "true" || name == "True") return make(line, ConstExpr{Value(true)});
      if (name == "false" || name == "False") return make(line, ConstExpr{Value(false)});
      if (name == "none" || name == "None") return make(line, ConstExpr{Value(nullptr)});
      note_name_load(name);
      return make(line, NameExpr{name});
    }
    case TokenType::kString: {
      std::string s;
      while (cur().type == TokenType::kString) s += next().text;  // "a" "b" is "ab"
      return make(line, ConstExpr{Value(std::move(s))});
    }
    case TokenType::kInteger:
      return make(line, ConstExpr{Value(next().int_value)});
    case TokenType::kFloat:
      return make(line, ConstExpr{Value(next().float_value)});
    default:
      break;
  }
  if (skip_op("(")) {
    ExprPtr e = parse_tuple(true, {}, true);
    expect_op(")");
    return e;
  }
  if (skip_op("[")) {
    ListExpr list;
    while (!at_op("]")) {
      if (!list.items.empty()) expect_op(",");
      if (at_op("]")) break;
      list.items.push_back(parse_expression());
    }
    expect_op("]");
    return make(line, std::move(list));
  }
  if (skip_op("{")) {
    DictExpr dict;
    while (!at_op("}")) {
      if (!dict.items.empty()) expect_op(",");
      if (at_op("}")) break;
      ExprPtr key = parse_expression();
      expect_op(":");
      dict.items.emplace_back(std::move(key), parse_expression());
    }
    expect_op("}");
    return make(line, std::move(dict));
  }
  unexpected("an expression");
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_op(".") || at_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_op("(")) {
      const int line = cur().line;
      node = make(line, CallExpr{std::move(node), parse_call_args()});
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (at_op("|")) {
      node = parse_filter_chain(std::move(node), false);
    } else if (at_name("is")) {
      node = parse_test(std::move(node));
    } else if (at_op("(")) {
      const int line = cur().line;
      node = make(line, CallExpr{std::move(node), parse_call_args()});
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const Token& t = next();
  const int line = t.line;
  if (t.text == ".") {
    const Token& attr = next();
    if (attr.type == TokenType::kName) return make(line, GetattrExpr{std::move(node), attr.text});
    if (attr.type != TokenType::kInteger) syntax_error(attr.line, "expected name or number");
    return make(line, GetitemExpr{std::move(node), make(line, ConstExpr{Value(attr.int_value)})});
  }
  std::vector<ExprPtr> args;
  while (!at_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  if (args.size() == 1) return make(line, GetitemExpr{std::move(node), std::move(args[0])});
  return make(line, GetitemExpr{std::move(node), make(line, ListExpr{std::move(args), true})});
}

ExprPtr Parser::parse_subscribed() {
  const int line = cur().line;
  SliceExpr slice;
  if (!at_op(":")) {
    ExprPtr e = parse_expression();
    if (!at_op(":")) return e;
    slice.start = std::move(e);
  }
  next();  // the first ':'
  auto at_slice_end = [&] { return at_op(":") || at_op("]") || at_op(","); };
  if (!at_slice_end()) slice.stop = parse_expression();
  if (skip_op(":") && !at_op("]") && !at_op(",")) slice.step = parse_expression();
  return make(line, std::move(slice));
}

CallSpec Parser::parse_call_args() {
  const int line = cur().line;
  expect_op("(");
  CallSpec call;
  auto ensure = [&](bool ok) {
    if (!ok) syntax_error(line, "invalid syntax for function call expression");
  };
  bool require_comma = false;
  while (!at_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (at_op(")")) break;  // trailing comma
    }
    if (skip_op("*")) {
      ensure(!call.dyn_args && !call.dyn_kwargs);
      call.dyn_args = parse_expression();
    } else if (skip_op("**")) {
      ensure(!call.dyn_kwargs);
      call.dyn_kwargs = parse_expression();
    } else if (cur().type == TokenType::kName && look().type == TokenType::kOperator &&
               look().text == "=") {
      ensure(!call.dyn_kwargs);
      std::string key = next().text;
      next();
      call.kwargs.push_back(Keyword{std::move(key), parse_expression()});
    } else {
      ensure(!call.dyn_args && !call.dyn_kwargs && call.kwargs.empty());
      call.args.push_back(parse_expression());
    }
    require_comma = true;
  }
  expect_op(")");
  return call;
}

ExprPtr Parser::parse_filter_chain(ExprPtr operand, bool start_inline) {
  while (at_op("|") || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    const int line = cur().line;
    std::string name = expect_name();
    while (skip_op(".")) name += fmt::format(".{}", expect_name());
    FilterExpr f;
    f.operand = std::move(operand);
    if (at_op("(")) f.call = parse_call_args();
    f.fn = find_filter(name);
    if (f.fn == nullptr) {
      if (is_jinja_filter(name)) unsupported(line, fmt::format("the filter '{}'", name));
      note_unknown(line, fmt::format("filter named '{}'", name));
    }
    f.name = std::move(name);
    operand = make(line, std::move(f));
  }
  return operand;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  const int line = next().line;  // "is"
  const bool negated = skip_name("not");
  std::string name = expect_name();
  while (skip_op(".")) name += fmt::format(".{}", expect_name());
  TestExpr test;
  test.operand = std::move(node);
  const Token& t = cur();
  const bool starts_arg = t.type == TokenType::kName || t.type == TokenType::kString ||
                          t.type == TokenType::kInteger || t.type == TokenType::kFloat ||
                          at_op("[") || at_op("{");
  if (at_op("(")) {
    test.call = parse_call_args();
  } else if (starts_arg && !at_name("else") && !at_name("or") && !at_name("and")) {
    if (at_name("is")) syntax_error(t.line, "you cannot chain multiple tests with 'is'");
    test.call.args.push_back(parse_postfix(parse_primary()));
  }
  test.fn = find_test(name);
  if (test.fn == nullptr) {
    if (is_jinja_test(name)) unsupported(line, fmt::format("the test '{}'", name));
    note_unknown(line, fmt::format("test named '{}'", name));
  }
  test.name = std::move(name);
  ExprPtr e = make(line, std::move(test));
  if (negated) e = make(line, UnaryExpr{UnaryOp::kNot, std::move(e)});
  return e;
}

}  // namespace inflight::jinja
