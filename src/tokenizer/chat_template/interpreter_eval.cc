// Expression half of the Interpreter.
#include "tokenizer/chat_template/access.h"
#include "tokenizer/chat_template/interpreter.h"
#include "tokenizer/chat_template/methods.h"
#include "tokenizer/chat_template/operators.h"
#include "tokenizer/chat_template/python_format.h"
#include "tokenizer/chat_template/render_error.h"

namespace inflight::jinja {

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  try {
    tick();
    Value v = eval_node(e, scope);
    charge(v);
    return v;
  } catch (RenderError& err) {
    err.set_line(e.line);
    throw;
  }
}

Value Interpreter::eval_node(const Expr& e, const ScopePtr& scope) {
  if (const auto* n = std::get_if<ConstExpr>(&e.node)) return n->value;
  if (const auto* n = std::get_if<NameExpr>(&e.node)) return lookup(n->name, scope);
  if (const auto* n = std::get_if<GetattrExpr>(&e.node)) {
    return get_attr(eval(*n->object, scope), n->attr);
  }
  if (const auto* n = std::get_if<GetitemExpr>(&e.node)) {
    const Value object = eval(*n->object, scope);
    if (const auto* slice = std::get_if<SliceExpr>(&n->index->node)) {
      auto part = [&](const ExprPtr& p) { return p ? eval(*p, scope) : Value(nullptr); };
      return get_slice(object, part(slice->start), part(slice->stop), part(slice->step));
    }
    return get_item(object, eval(*n->index, scope));
  }
  if (std::holds_alternative<SliceExpr>(e.node)) render_fail("a slice outside of a subscript");
  if (const auto* n = std::get_if<ListExpr>(&e.node)) {
    ValueList items;
    items.reserve(n->items.size());
    for (const ExprPtr& item : n->items) items.push_back(eval(*item, scope));
    return n->tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  if (const auto* n = std::get_if<DictExpr>(&e.node)) {
    ValueMap map;
    for (const auto& [k, v] : n->items) {
      Value key = eval(*k, scope);
      check_hashable(key);
      map.set(std::move(key), eval(*v, scope));
    }
    return Value::dict(std::move(map));
  }
  if (const auto* n = std::get_if<UnaryExpr>(&e.node)) {
    const Value v = eval(*n->operand, scope);
    switch (n->op) {
      case UnaryOp::kNot:
        return Value(!v.truthy());
      case UnaryOp::kNeg:
        return negate(v);
      case UnaryOp::kPos:
        return unary_plus(v);
    }
  }
  if (const auto* n = std::get_if<BinaryExpr>(&e.node)) {
    Value left = eval(*n->left, scope);
    // and / or return an operand, as Python's.
    if (n->op == BinaryOp::kAnd) return left.truthy() ? eval(*n->right, scope) : left;
    if (n->op == BinaryOp::kOr) return left.truthy() ? left : eval(*n->right, scope);
    return binary_op(n->op, left, eval(*n->right, scope));
  }
  if (const auto* n = std::get_if<ConcatExpr>(&e.node)) {
    std::string out;
    for (const ExprPtr& part : n->parts) append_str(out, eval(*part, scope));
    if (out.size() > kMaxResultSize) render_fail("string is too large");
    return Value(std::move(out));
  }
  if (const auto* n = std::get_if<CompareExpr>(&e.node)) {
    Value left = eval(*n->first, scope);
    for (const auto& [op, expr] : n->rest) {
      Value right = eval(*expr, scope);
      if (!compare(op, left, right)) return Value(false);
      left = std::move(right);
    }
    return Value(true);
  }
  if (const auto* n = std::get_if<CondExpr>(&e.node)) {
    if (eval(*n->test, scope).truthy()) return eval(*n->then, scope);
    if (n->otherwise) return eval(*n->otherwise, scope);
    return Value::undefined(
        "the inline if-expression evaluated to false and no else section was defined");
  }
  if (const auto* n = std::get_if<CallExpr>(&e.node)) return eval_call(*n, scope, nullptr);
  if (const auto* n = std::get_if<FilterExpr>(&e.node)) return eval_filter(*n, scope, nullptr);
  const auto& t = std::get<TestExpr>(e.node);
  const Value input = eval(*t.operand, scope);
  const CallArgs args = eval_args(t.call, scope);
  if (t.fn == nullptr) render_fail("no test named '{}'", t.name);
  return Value(t.fn(*this, input, args));
}

Value Interpreter::eval_filter(const FilterExpr& f, const ScopePtr& scope,
                               const Value* block_input) {
  Value input;
  if (!f.operand) {
    input = *block_input;
  } else if (const auto* inner = std::get_if<FilterExpr>(&f.operand->node);
             inner != nullptr && block_input != nullptr) {
    input = eval_filter(*inner, scope, block_input);
  } else {
    input = eval(*f.operand, scope);
  }
  const CallArgs args = eval_args(f.call, scope);
  if (f.fn == nullptr) render_fail("no filter named '{}'", f.name);
  return f.fn(*this, input, args);
}

Value Interpreter::eval_call(const CallExpr& c, const ScopePtr& scope, const Value* caller) {
  Value callee;
  if (const auto* attr = std::get_if<GetattrExpr>(&c.callee->node)) {
    // obj.method(...) calls the method directly instead of binding it first.
    Value object = eval(*attr->object, scope);
    if (caller == nullptr && find_method(object, attr->attr) == MethodLookup::kFound) {
      return call_method(*this, object, attr->attr, eval_args(c.call, scope));
    }
    callee = get_attr(object, attr->attr);
  } else {
    callee = eval(*c.callee, scope);
  }
  CallArgs args = eval_args(c.call, scope);
  if (caller != nullptr) args.keyword.emplace_back("caller", *caller);
  return call(callee, args);
}

CallArgs Interpreter::eval_args(const CallSpec& spec, const ScopePtr& scope) {
  CallArgs args;
  args.positional.reserve(spec.args.size());
  for (const ExprPtr& a : spec.args) args.positional.push_back(eval(*a, scope));
  for (const Keyword& k : spec.kwargs) args.keyword.emplace_back(k.name, eval(*k.value, scope));
  if (spec.dyn_args) {
    for (Value& v : iterate(eval(*spec.dyn_args, scope))) args.positional.push_back(std::move(v));
  }
  if (spec.dyn_kwargs) {
    const Value kw = eval(*spec.dyn_kwargs, scope);
    if (!kw.is_dict()) render_fail("argument after ** must be a mapping, not {}", kw.type_name());
    for (const auto& [k, v] : kw.map()) {
      if (!k.is_string()) render_fail("keywords must be strings");
      args.keyword.emplace_back(k.str(), v);
    }
  }
  return args;
}

}  // namespace inflight::jinja
