#include "tokenizer/chat_template/parser.h"

#include <gtest/gtest.h>

#include <string>

#include "core/check.h"
#include "tokenizer/chat_template/python_format.h"

namespace inflight::jinja {
namespace {

// S-expression of an expression tree, to check precedence and associativity.
std::string sexpr(const Expr& e) {
  if (const auto* n = std::get_if<ConstExpr>(&e.node)) return to_repr(n->value);
  if (const auto* n = std::get_if<NameExpr>(&e.node)) return n->name;
  if (const auto* n = std::get_if<GetattrExpr>(&e.node))
    return "(. " + sexpr(*n->object) + " " + n->attr + ")";
  if (const auto* n = std::get_if<GetitemExpr>(&e.node))
    return "([] " + sexpr(*n->object) + " " + sexpr(*n->index) + ")";
  if (const auto* n = std::get_if<SliceExpr>(&e.node)) {
    auto part = [](const ExprPtr& p) { return p ? sexpr(*p) : std::string("_"); };
    return "(: " + part(n->start) + " " + part(n->stop) + " " + part(n->step) + ")";
  }
  if (const auto* n = std::get_if<ListExpr>(&e.node)) {
    std::string s = n->tuple ? "(tuple" : "(list";
    for (const auto& i : n->items) s += " " + sexpr(*i);
    return s + ")";
  }
  if (const auto* n = std::get_if<UnaryExpr>(&e.node)) {
    const char* op = n->op == UnaryOp::kNot ? "not" : n->op == UnaryOp::kNeg ? "neg" : "pos";
    return std::string("(") + op + " " + sexpr(*n->operand) + ")";
  }
  if (const auto* n = std::get_if<BinaryExpr>(&e.node)) {
    static const char* kOps[] = {"+", "-", "*", "/", "//", "%", "**", "and", "or"};
    return std::string("(") + kOps[static_cast<int>(n->op)] + " " + sexpr(*n->left) + " " +
           sexpr(*n->right) + ")";
  }
  if (const auto* n = std::get_if<ConcatExpr>(&e.node)) {
    std::string s = "(~";
    for (const auto& p : n->parts) s += " " + sexpr(*p);
    return s + ")";
  }
  if (const auto* n = std::get_if<CompareExpr>(&e.node)) {
    static const char* kOps[] = {"==", "!=", "<", "<=", ">", ">=", "in", "notin"};
    std::string s = "(cmp " + sexpr(*n->first);
    for (const auto& [op, x] : n->rest)
      s += std::string(" ") + kOps[static_cast<int>(op)] + " " + sexpr(*x);
    return s + ")";
  }
  if (const auto* n = std::get_if<CondExpr>(&e.node)) {
    return "(if " + sexpr(*n->test) + " " + sexpr(*n->then) + " " +
           (n->otherwise ? sexpr(*n->otherwise) : std::string("_")) + ")";
  }
  if (const auto* n = std::get_if<CallExpr>(&e.node)) {
    std::string s = "(call " + sexpr(*n->callee);
    for (const auto& a : n->call.args) s += " " + sexpr(*a);
    for (const auto& k : n->call.kwargs) s += " " + k.name + "=" + sexpr(*k.value);
    return s + ")";
  }
  if (const auto* n = std::get_if<FilterExpr>(&e.node)) {
    std::string s = "(|" + n->name + " " + (n->operand ? sexpr(*n->operand) : "_");
    for (const auto& a : n->call.args) s += " " + sexpr(*a);
    return s + ")";
  }
  if (const auto* n = std::get_if<TestExpr>(&e.node)) {
    std::string s = "(is-" + n->name + " " + sexpr(*n->operand);
    for (const auto& a : n->call.args) s += " " + sexpr(*a);
    return s + ")";
  }
  return "?";
}

std::string parse_expr(const std::string& expr) {
  auto program = parse_program("{{ " + expr + " }}");
  return sexpr(*std::get<PrintStmt>(program->body.at(0).node).expr);
}

TEST(JinjaParserTest, OperatorPrecedenceMatchesJinja2) {
  EXPECT_EQ(parse_expr("a or b and not c"), "(or a (and b (not c)))");
  EXPECT_EQ(parse_expr("a + b * c - d"), "(- (+ a (* b c)) d)");
  EXPECT_EQ(parse_expr("a ~ b + c"), "(+ (~ a b) c)");      // ~ binds tighter than + and -
  EXPECT_EQ(parse_expr("2 ** 3 ** 2"), "(** (** 2 3) 2)");  // left-associative in jinja2
  EXPECT_EQ(parse_expr("-x | abs"), "(|abs (neg x))");
  EXPECT_EQ(parse_expr("-x.y"), "(neg (. x y))");
  EXPECT_EQ(parse_expr("not a == b"), "(not (cmp a == b))");
  EXPECT_EQ(parse_expr("a < b <= c"), "(cmp a < b <= c)");
  EXPECT_EQ(parse_expr("a not in b"), "(cmp a notin b)");
  EXPECT_EQ(parse_expr("x if c else y if d else z"), "(if c x (if d y z))");
  EXPECT_EQ(parse_expr("x if c"), "(if c x _)");
}

TEST(JinjaParserTest, PostfixFiltersAndTests) {
  EXPECT_EQ(parse_expr("a.b[0]['c'](1, k=2)"), "(call ([] ([] (. a b) 0) 'c') 1 k=2)");
  EXPECT_EQ(parse_expr("x | trim | replace('a', 'b')"), "(|replace (|trim x) 'a' 'b')");
  EXPECT_EQ(parse_expr("x is not none"), "(not (is-none x))");
  EXPECT_EQ(parse_expr("x is divisibleby 3"), "(is-divisibleby x 3)");
  EXPECT_EQ(parse_expr("x is defined and y"), "(and (is-defined x) y)");
  EXPECT_EQ(parse_expr("x.0"), "([] x 0)");
  EXPECT_EQ(parse_expr("s[1:]"), "([] s (: 1 _ _))");
  EXPECT_EQ(parse_expr("s[::-1]"), "([] s (: _ _ (neg 1)))");
  EXPECT_EQ(parse_expr("(1, 2)"), "(tuple 1 2)");
  EXPECT_EQ(parse_expr("[1, 2,]"), "(list 1 2)");
  EXPECT_EQ(parse_expr("'a' 'b'"), "'ab'");
  EXPECT_EQ(parse_expr("true"), "True");
  EXPECT_EQ(parse_expr("None"), "None");
}

TEST(JinjaParserTest, Statements) {
  auto p = parse_program(
      "{% for k, v in d.items() if v %}{{ k }}{% else %}none{% endfor %}"
      "{% set ns.x = 1 %}{% set y %}b{% endset %}{% macro m(a, b=2) %}{{ caller() }}{% endmacro "
      "%}");
  ASSERT_EQ(p->body.size(), 4u);
  const auto& f = std::get<ForStmt>(p->body[0].node);
  EXPECT_EQ(f.target.names, (std::vector<std::string>{"k", "v"}));
  EXPECT_TRUE(f.target.unpack);
  EXPECT_TRUE(f.filter != nullptr);
  EXPECT_EQ(f.otherwise.size(), 1u);
  const auto& s = std::get<SetStmt>(p->body[1].node);
  EXPECT_EQ(s.target.names[0], "ns");
  EXPECT_EQ(s.target.ns_attr, "x");
  EXPECT_TRUE(std::holds_alternative<SetBlockStmt>(p->body[2].node));
  const auto& m = *std::get<MacroStmt>(p->body[3].node).macro;
  EXPECT_EQ(m.params, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m.defaults.size(), 1u);
  EXPECT_TRUE(m.uses_caller);
  EXPECT_FALSE(m.uses_varargs);
}

void expect_error(const std::string& source, ErrorCode code, const std::string& fragment) {
  try {
    parse_program(source);
    FAIL() << "no error for: " << source;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(JinjaParserTest, SyntaxErrorsNameTheLine) {
  expect_error("a\n{% if x %}\nb", ErrorCode::kInvalidFile,
               "line 3: unexpected end of template, expected 'elif' or 'else' or 'endif'");
  expect_error("{% endfor %}", ErrorCode::kInvalidFile, "unknown tag 'endfor'");
  expect_error("\n{% do x %}", ErrorCode::kInvalidFile, "line 2: encountered unknown tag 'do'");
  expect_error("{{ }}", ErrorCode::kInvalidFile, "expected an expression");
  expect_error("{{ a b }}", ErrorCode::kInvalidFile, "expected end of print statement");
  expect_error("{% break %}", ErrorCode::kInvalidFile, "'break' outside of a for loop");
  expect_error("{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}",
               ErrorCode::kInvalidFile, "'continue' outside of a for loop");
  expect_error("{% macro m(a=1, b) %}{% endmacro %}", ErrorCode::kInvalidFile,
               "non-default argument follows default argument");
  expect_error("{% set true = 1 %}", ErrorCode::kInvalidFile, "can't assign");
  expect_error("{{ x is defined is defined }}", ErrorCode::kInvalidFile, "");
}

TEST(JinjaParserTest, DeepNestingIsRejectedNotOverflowed) {
  const std::string parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  expect_error(parens, ErrorCode::kInvalidFile, "nested too deeply");
  std::string nots = "{{ ";
  for (int i = 0; i < 5000; ++i) nots += "not ";
  expect_error(nots + "x }}", ErrorCode::kInvalidFile, "nested too deeply");
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if x %}";
  expect_error(ifs, ErrorCode::kInvalidFile, "nested too deeply");
  std::string conds = "{{ 1";
  for (int i = 0; i < 5000; ++i) conds += " if x else 1";
  expect_error(conds + " }}", ErrorCode::kInvalidFile, "nested too deeply");
}

TEST(JinjaParserTest, UnsupportedConstructsNameTheConstruct) {
  expect_error("\n\n{% include 'other.jinja' %}", ErrorCode::kUnsupported,
               "line 3: the '{% include %}' tag is not supported");
  expect_error("{% extends 'base' %}", ErrorCode::kUnsupported, "'{% extends %}' tag");
  expect_error("{{ x | urlize }}", ErrorCode::kUnsupported, "line 1: the filter 'urlize'");
  expect_error("{{ x is escaped_thing }}", ErrorCode::kInvalidFile,
               "no test named 'escaped_thing'");
  expect_error("{% for x in y recursive %}{% endfor %}", ErrorCode::kUnsupported,
               "a recursive for loop");
}

TEST(JinjaParserTest, UnknownFilterFailsAtParseTimeOutsideConditionals) {
  // As jinja2: unknown filters are compile errors, except inside an if (or inline if) of the
  // same frame, where only evaluating them fails.
  expect_error("{{ x | from_json }}", ErrorCode::kInvalidFile, "no filter named 'from_json'");
  expect_error("{% if c %}{% for i in x %}{{ i | from_json }}{% endfor %}{% endif %}",
               ErrorCode::kInvalidFile, "no filter named 'from_json'");
  expect_error("{% if c %}{% macro m() %}{{ 1 | nope }}{% endmacro %}{% endif %}",
               ErrorCode::kInvalidFile, "no filter named 'nope'");
  EXPECT_NO_THROW(parse_program("{% if c %}{{ x | from_json }}{% endif %}"));
  EXPECT_NO_THROW(parse_program("{% if c %}{% elif d %}{% else %}{{ x | from_json }}{% endif %}"));
  EXPECT_NO_THROW(parse_program("{{ (x | from_json) if c else 1 }}"));
  EXPECT_NO_THROW(parse_program("{{ 1 if c else x | from_json }}"));
}

}  // namespace
}  // namespace inflight::jinja
