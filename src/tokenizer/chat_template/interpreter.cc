#include "tokenizer/chat_template/interpreter.h"

#include "tokenizer/chat_template/access.h"
#include "tokenizer/chat_template/builtins.h"
#include "tokenizer/chat_template/methods.h"
#include "tokenizer/chat_template/operators.h"
#include "tokenizer/chat_template/python_format.h"
#include "tokenizer/chat_template/render_error.h"

namespace inflight::jinja {
namespace {

// Guards against runaway templates (deep macro recursion, huge loops): jinja2 would hit
// Python's recursion limit or run for ever; a server must not.
constexpr int kMaxCallDepth = 256;
constexpr std::size_t kMaxSteps = 10'000'000;
constexpr std::size_t kMaxWork = std::size_t{1} << 30;  // bytes of values produced, roughly

void check_size(const std::string& out) {
  if (out.size() > kMaxResultSize) render_fail("rendered output exceeds {} bytes", kMaxResultSize);
}

struct DepthGuard {
  int& depth;
  explicit DepthGuard(int& d, const std::string& name) : depth(d) {
    if (++depth > kMaxCallDepth) {
      --depth;
      render_fail("maximum recursion depth exceeded calling {}", name);
    }
  }
  ~DepthGuard() { --depth; }
};

Value make_loop(std::size_t i, const ValueList& items) {
  const auto n = static_cast<std::int64_t>(items.size());
  const auto idx = static_cast<std::int64_t>(i);
  ValueMap loop;
  loop.append_new("index0", Value(idx));
  loop.append_new("index", Value(idx + 1));
  loop.append_new("revindex0", Value(n - idx - 1));
  loop.append_new("revindex", Value(n - idx));
  loop.append_new("first", Value(i == 0));
  loop.append_new("last", Value(idx == n - 1));
  loop.append_new("length", Value(n));
  loop.append_new("depth0", Value(0));
  loop.append_new("depth", Value(1));
  loop.append_new("previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
  loop.append_new("nextitem",
                  idx + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
  loop.append_new("cycle", Value::callable("loop.cycle", [idx](Interpreter&, const CallArgs& args) {
                    if (args.positional.empty()) render_fail("no items for cycling given");
                    return args.positional[static_cast<std::size_t>(idx) % args.positional.size()];
                  }));
  return Value::new_namespace(std::move(loop), false);
}

}  // namespace

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
    for (const auto& [k, v] : s->vars_) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Scope::set(const std::string& name, Value value) {
  for (auto& [k, v] : vars_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars_.emplace_back(name, std::move(value));
}

Interpreter::~Interpreter() {
  for (Value& ns : namespaces_) ns.ns().attrs = ValueMap();
}

std::string Interpreter::render(const Program& program, ValueMap context) {
  auto root = std::make_shared<Scope>(nullptr);
  for (const auto& [k, v] : context) root->set(k.str(), v);
  std::string out;
  exec(program.body, root, out);
  return out;
}

void Interpreter::charge(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      work_ += v.str().size();
      break;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      work_ += v.items().size() * sizeof(Value);
      break;
    case Value::Kind::kDict:
      work_ += v.map().size() * 2 * sizeof(Value);
      break;
    default:
      return;
  }
  if (work_ > kMaxWork)
    render_fail("template exceeded its work limit ({} bytes of values)", kMaxWork);
}

void Interpreter::tick() {
  if (++steps_ > kMaxSteps)
    render_fail("template exceeded the limit of {} evaluation steps", kMaxSteps);
}

Value Interpreter::lookup(const std::string& name, const ScopePtr& scope) const {
  if (const Value* v = scope->find(name)) return *v;
  Value g = find_global(name);
  if (!g.is_undefined()) return g;
  return Value::undefined("'" + name + "' is undefined");
}

Value Interpreter::call(const Value& callee, const CallArgs& args) {
  if (callee.is_callable()) return callee.callable().fn(*this, args);
  if (callee.is_undefined()) fail_undefined(callee);
  render_fail("'{}' object is not callable", callee.type_name());
}

Value Interpreter::apply_filter(std::string_view name, const Value& input, const CallArgs& args) {
  FilterFn fn = find_filter(name);
  if (fn == nullptr) render_fail("no filter named '{}'", name);
  return fn(*this, input, args);
}

bool Interpreter::apply_test(std::string_view name, const Value& input, const CallArgs& args) {
  TestFn fn = find_test(name);
  if (fn == nullptr) render_fail("no test named '{}'", name);
  return fn(*this, input, args);
}

// ---- statements ------------------------------------------------------------------------------

Interpreter::Flow Interpreter::exec(const StmtList& body, const ScopePtr& scope, std::string& out) {
  for (const Stmt& stmt : body) {
    const Flow f = exec_stmt(stmt, scope, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& stmt, const ScopePtr& scope,
                                         std::string& out) {
  try {
    tick();
    if (const auto* s = std::get_if<TextStmt>(&stmt.node)) {
      out += s->text;
      check_size(out);
    } else if (const auto* s = std::get_if<PrintStmt>(&stmt.node)) {
      append_str(out, eval(*s->expr, scope));
      check_size(out);
    } else if (const auto* s = std::get_if<IfStmt>(&stmt.node)) {
      for (const auto& [test, body] : s->branches) {
        if (eval(*test, scope).truthy()) return exec(body, scope, out);
      }
      return exec(s->otherwise, scope, out);
    } else if (const auto* s = std::get_if<ForStmt>(&stmt.node)) {
      return exec_for(*s, scope, out);
    } else if (const auto* s = std::get_if<SetStmt>(&stmt.node)) {
      assign(s->target, eval(*s->value, scope), *scope);
    } else if (const auto* s = std::get_if<SetBlockStmt>(&stmt.node)) {
      auto child = std::make_shared<Scope>(scope);
      std::string buf;
      const Flow f = exec(s->body, child, buf);
      Value v(std::move(buf));
      if (s->filter) v = eval_filter(std::get<FilterExpr>(s->filter->node), child, &v);
      assign(s->target, v, *scope);
      return f;
    } else if (const auto* s = std::get_if<MacroStmt>(&stmt.node)) {
      scope->set(s->macro->name, make_macro(s->macro, scope));
    } else if (const auto* s = std::get_if<CallBlockStmt>(&stmt.node)) {
      exec_call_block(*s, scope, out);
    } else if (const auto* s = std::get_if<FilterBlockStmt>(&stmt.node)) {
      auto child = std::make_shared<Scope>(scope);
      std::string buf;
      const Flow f = exec(s->body, child, buf);
      const Value input(std::move(buf));
      append_str(out, eval_filter(std::get<FilterExpr>(s->filter->node), child, &input));
      return f;
    } else if (const auto* s = std::get_if<WithStmt>(&stmt.node)) {
      auto child = std::make_shared<Scope>(scope);
      for (const auto& [target, value] : s->assignments)
        assign(target, eval(*value, scope), *child);
      return exec(s->body, child, out);
    } else if (const auto* s = std::get_if<ScopeStmt>(&stmt.node)) {
      return exec(s->body, std::make_shared<Scope>(scope), out);
    } else if (const auto* s = std::get_if<LoopControlStmt>(&stmt.node)) {
      return s->is_break ? Flow::kBreak : Flow::kContinue;
    }
    return Flow::kNormal;
  } catch (RenderError& e) {
    e.set_line(stmt.line);
    throw;
  }
}

Interpreter::Flow Interpreter::exec_for(const ForStmt& s, const ScopePtr& scope, std::string& out) {
  ValueList items = iterate(eval(*s.iterable, scope));
  if (s.filter) {
    ValueList kept;
    for (Value& item : items) {
      auto test_scope = std::make_shared<Scope>(scope);
      assign(s.target, item, *test_scope);
      if (eval(*s.filter, test_scope).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    tick();
    auto child = std::make_shared<Scope>(scope);
    assign(s.target, items[i], *child);
    if (s.uses_loop) child->set("loop", make_loop(i, items));
    if (exec(s.body, child, out) == Flow::kBreak) break;
  }
  if (items.empty()) return exec(s.otherwise, std::make_shared<Scope>(scope), out);
  return Flow::kNormal;
}

void Interpreter::exec_call_block(const CallBlockStmt& s, const ScopePtr& scope, std::string& out) {
  const Value caller = make_macro(s.caller, scope);
  append_str(out, eval_call(std::get<CallExpr>(s.call->node), scope, &caller));
  check_size(out);
}

void Interpreter::assign(const Target& target, const Value& value, Scope& scope) {
  if (!target.ns_attr.empty()) {
    const Value* ns = scope.find(target.names[0]);
    if (ns == nullptr || !ns->is_namespace() || !ns->ns().assignable) {
      render_fail("cannot assign attribute on non-namespace object '{}'", target.names[0]);
    }
    ns->ns().attrs.set(target.ns_attr, value);
    return;
  }
  if (!target.unpack) {
    scope.set(target.names[0], value);
    return;
  }
  const ValueList items = iterate(value);
  if (items.size() > target.names.size()) {
    render_fail("too many values to unpack (expected {})", target.names.size());
  }
  if (items.size() < target.names.size()) {
    render_fail("not enough values to unpack (expected {}, got {})", target.names.size(),
                items.size());
  }
  for (std::size_t i = 0; i < items.size(); ++i) scope.set(target.names[i], items[i]);
}

Value Interpreter::make_macro(const std::shared_ptr<const MacroDef>& def, const ScopePtr& scope) {
  // NOTE: the macro holds its defining scope weakly: the scope holds the macro, and a strong
  // reference would be a cycle. Top-level macros (all real templates) outlive every call.
  std::weak_ptr<Scope> defined_in = scope;
  return Value::callable("macro '" + def->name + "'",
                         [def, defined_in](Interpreter& interp, const CallArgs& args) {
                           return interp.call_macro(*def, defined_in, args);
                         });
}

Value Interpreter::call_macro(const MacroDef& def, const std::weak_ptr<Scope>& defined_in,
                              const CallArgs& args) {
  const std::string what = "macro '" + def.name + "'";
  ScopePtr parent = defined_in.lock();
  if (!parent) render_fail("{} was called after the scope that defined it ended", what);
  DepthGuard guard(call_depth_, what);
  auto scope = std::make_shared<Scope>(parent);

  const std::size_t num_params = def.params.size();
  if (args.positional.size() > num_params && !def.uses_varargs) {
    render_fail("{} takes not more than {} argument(s)", what, num_params);
  }
  std::vector<const Value*> bound(num_params, nullptr);
  for (std::size_t i = 0; i < num_params && i < args.positional.size(); ++i) {
    bound[i] = &args.positional[i];
  }
  ValueMap extra_kwargs;
  bool has_caller = false;
  for (const auto& [key, value] : args.keyword) {
    std::size_t i = 0;
    while (i < num_params && def.params[i] != key) ++i;
    if (i < num_params) {
      if (bound[i] != nullptr) render_fail("{} got multiple values for argument '{}'", what, key);
      bound[i] = &value;
    } else if (key == "caller" && def.uses_caller) {
      scope->set("caller", value);
      has_caller = true;
    } else if (def.uses_kwargs) {
      extra_kwargs.set(key, value);
    } else {
      render_fail("{} takes no keyword argument '{}'", what, key);
    }
  }
  // Defaults are evaluated at call time, in the macro's scope: they may use earlier parameters.
  const std::size_t first_default = num_params - def.defaults.size();
  for (std::size_t i = 0; i < num_params; ++i) {
    if (bound[i] != nullptr) {
      scope->set(def.params[i], *bound[i]);
    } else if (i >= first_default) {
      scope->set(def.params[i], eval(*def.defaults[i - first_default], scope));
    } else {
      scope->set(def.params[i],
                 Value::undefined("parameter '" + def.params[i] + "' was not provided"));
    }
  }
  if (def.uses_varargs) {
    ValueList rest;
    for (std::size_t i = num_params; i < args.positional.size(); ++i)
      rest.push_back(args.positional[i]);
    scope->set("varargs", Value::tuple(std::move(rest)));
  }
  if (def.uses_kwargs) scope->set("kwargs", Value::dict(std::move(extra_kwargs)));
  if (def.uses_caller && !has_caller) scope->set("caller", Value::undefined("no caller defined"));
  std::string out;
  exec(def.body, scope, out);
  return Value(std::move(out));
}

}  // namespace inflight::jinja
