// Interpreter: renders a parsed Program against a context, one render at a time.
//
// One Interpreter per render call; the Program it reads is shared and never modified, which is
// what makes ChatTemplate::render thread-safe. Scoping follows jinja2: a for-loop iteration, a
// macro call and a with/filter/set block each get a child scope, so `{% set %}` inside them does
// not leak out (templates use namespace() for that); if-statements do not create scopes.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/chat_template/ast.h"
#include "tokenizer/chat_template/value.h"

namespace inflight::jinja {

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}
  // This scope or the nearest enclosing one that has `name`; nullptr if none.
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

struct RenderSettings {
  std::string fixed_now;  // see ChatTemplateRenderOptions::fixed_now
};

class Interpreter {
 public:
  explicit Interpreter(RenderSettings settings) : settings_(std::move(settings)) {}
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders program.body with `context` as the template's variables.
  std::string render(const Program& program, ValueMap context);

  // For filters, tests and globals that call back into the template.
  Value call(const Value& callee, const CallArgs& args);
  Value apply_filter(std::string_view name, const Value& input, const CallArgs& args);
  bool apply_test(std::string_view name, const Value& input, const CallArgs& args);
  const RenderSettings& settings() const { return settings_; }
  // namespace() objects made during the render. NOTE: a template can make one hold itself
  // (`{% set ns.me = ns %}`); the destructor empties them all to break such cycles.
  void adopt_namespace(const Value& ns) { namespaces_.push_back(ns); }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec(const StmtList& body, const ScopePtr& scope, std::string& out);
  Flow exec_stmt(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  Flow exec_for(const ForStmt& s, const ScopePtr& scope, std::string& out);
  void exec_call_block(const CallBlockStmt& s, const ScopePtr& scope, std::string& out);
  void assign(const Target& target, const Value& value, Scope& scope);
  Value make_macro(const std::shared_ptr<const MacroDef>& def, const ScopePtr& scope);
  Value call_macro(const MacroDef& def, const std::weak_ptr<Scope>& defined_in,
                   const CallArgs& args);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value eval_node(const Expr& e, const ScopePtr& scope);
  // Evaluates a filter chain; block_input replaces the innermost null operand (block filters).
  Value eval_filter(const FilterExpr& f, const ScopePtr& scope, const Value* block_input);
  Value eval_call(const CallExpr& c, const ScopePtr& scope, const Value* caller);
  CallArgs eval_args(const CallSpec& spec, const ScopePtr& scope);
  Value lookup(const std::string& name, const ScopePtr& scope) const;
  void tick();
  // Counts the size of every value an expression yields, a proxy for the copying and searching
  // a render does; a template that would churn through gigabytes is stopped.
  void charge(const Value& v);

  RenderSettings settings_;
  int call_depth_ = 0;
  std::size_t steps_ = 0;
  std::size_t work_ = 0;
  std::vector<Value> namespaces_;
};

}  // namespace inflight::jinja
