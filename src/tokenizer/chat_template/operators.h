// Python semantics of the template operators: arithmetic (+ - * / // % **), comparison and
// membership (in). Bool counts as int, int and float mix, str/list concatenate and repeat;
// anything else is the TypeError Python would raise. Using an undefined operand raises the
// undefined error (jinja2's default Undefined).
#pragma once

#include "tokenizer/chat_template/ast.h"
#include "tokenizer/chat_template/value.h"

namespace inflight::jinja {

// Arithmetic only (not kAnd / kOr, which short-circuit in the interpreter).
Value binary_op(BinaryOp op, const Value& left, const Value& right);
Value negate(const Value& operand);
Value unary_plus(const Value& operand);
bool compare(CompareOp op, const Value& left, const Value& right);
// `item in container`.
bool contains(const Value& container, const Value& item);

}  // namespace inflight::jinja
