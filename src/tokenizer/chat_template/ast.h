// The parsed template: expressions (Expr) and statements (Stmt), immutable after parsing.
//
// Each node records its template line for error messages. Filters and tests are resolved to
// functions at parse time; `fn == nullptr` marks a name jinja2 does not know inside an `if` or
// inline-if, which (as in jinja2) fails only if evaluated.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tokenizer/chat_template/call_args.h"
#include "tokenizer/chat_template/value.h"

namespace inflight::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtList = std::vector<Stmt>;

struct Keyword {
  std::string name;
  ExprPtr value;
};

// Arguments as written: f(a, b, k=v, *args, **kwargs).
struct CallSpec {
  std::vector<ExprPtr> args;
  std::vector<Keyword> kwargs;
  ExprPtr dyn_args;    // *expr, or null
  ExprPtr dyn_kwargs;  // **expr, or null
};

struct ConstExpr {
  Value value;
};
struct NameExpr {
  std::string name;
};
struct GetattrExpr {
  ExprPtr object;
  std::string attr;
};  // object.attr
struct GetitemExpr {
  ExprPtr object;
  ExprPtr index;
};  // object[index]
struct SliceExpr {
  ExprPtr start, stop, step;
};  // only as an index; parts may be null
struct ListExpr {
  std::vector<ExprPtr> items;
  bool tuple = false;
};
struct DictExpr {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

enum class UnaryOp { kNeg, kPos, kNot };
struct UnaryExpr {
  UnaryOp op;
  ExprPtr operand;
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kAnd, kOr };
struct BinaryExpr {
  BinaryOp op;
  ExprPtr left, right;
};

struct ConcatExpr {
  std::vector<ExprPtr> parts;
};  // a ~ b ~ c

enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };
// Chained as Python: a < b < c means a < b and b < c.
struct CompareExpr {
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct CondExpr {
  ExprPtr test, then, otherwise;
};  // then if test else otherwise (may be null)
struct CallExpr {
  ExprPtr callee;
  CallSpec call;
};
// operand|name(args); operand is null for the filter of a {% filter %} or {% set %} block.
struct FilterExpr {
  ExprPtr operand;
  std::string name;
  FilterFn fn = nullptr;
  CallSpec call;
};
struct TestExpr {
  ExprPtr operand;
  std::string name;
  TestFn fn = nullptr;
  CallSpec call;
};

struct Expr {
  int line = 0;
  std::variant<ConstExpr, NameExpr, GetattrExpr, GetitemExpr, SliceExpr, ListExpr, DictExpr,
               UnaryExpr, BinaryExpr, ConcatExpr, CompareExpr, CondExpr, CallExpr, FilterExpr,
               TestExpr>
      node;
};

// Assignment target: a name, names unpacked from a sequence (a, b), or a namespace attribute.
struct Target {
  std::vector<std::string> names;
  bool unpack = false;  // `for k, v in ...` / `set a, b = ...`
  std::string ns_attr;  // non-empty: `ns.attr`, with names[0] = "ns"
};

struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  std::vector<Stmt> body;
  // Whether the body reads these names (jinja2 only accepts extra arguments then).
  bool uses_varargs = false;
  bool uses_kwargs = false;
  bool uses_caller = false;
};

struct TextStmt {
  std::string text;
};
struct PrintStmt {
  ExprPtr expr;
};
struct IfStmt {
  std::vector<std::pair<ExprPtr, StmtList>> branches;  // if / elif ...
  StmtList otherwise;
};
struct ForStmt {
  Target target;
  ExprPtr iterable;
  ExprPtr filter;  // `for x in xs if cond`, or null
  StmtList body;
  StmtList otherwise;      // runs when no item was iterated
  bool uses_loop = false;  // the body reads `loop`: only then is the loop object built
};
struct SetStmt {
  Target target;
  ExprPtr value;
};
struct SetBlockStmt {
  Target target;
  ExprPtr filter;
  StmtList body;
};  // filter may be null
struct MacroStmt {
  std::shared_ptr<const MacroDef> macro;
};
struct CallBlockStmt {
  std::shared_ptr<const MacroDef> caller;
  ExprPtr call;
};
struct FilterBlockStmt {
  ExprPtr filter;
  StmtList body;
};
struct WithStmt {
  std::vector<std::pair<Target, ExprPtr>> assignments;
  StmtList body;
};
struct ScopeStmt {
  StmtList body;
};  // {% generation %}: a body in its own scope
struct LoopControlStmt {
  bool is_break = false;
};

struct Stmt {
  int line = 0;
  std::variant<TextStmt, PrintStmt, IfStmt, ForStmt, SetStmt, SetBlockStmt, MacroStmt,
               CallBlockStmt, FilterBlockStmt, WithStmt, ScopeStmt, LoopControlStmt>
      node;
};

struct Program {
  std::string source;
  StmtList body;
};

}  // namespace inflight::jinja
