// Python methods of str, dict and list/tuple values that templates call, e.g.
// message.content.strip(), tool.get('name'), args.items(), text.split('\n').
//
// As in transformers' ImmutableSandboxedEnvironment, methods that would mutate a list or dict
// (append, pop, update, ...) exist but are refused: using them is a security error.
#pragma once

#include <string_view>

#include "tokenizer/chat_template/call_args.h"
#include "tokenizer/chat_template/value.h"

namespace inflight::jinja {

enum class MethodLookup { kMissing, kFound, kUnsafe };

MethodLookup find_method(const Value& object, std::string_view name);
// Calls a method that find_method() reported kFound.
Value call_method(Interpreter& interp, const Value& object, std::string_view name,
                  const CallArgs& args);
// The method as a value (a bound callable), an unsafe undefined, or a plain undefined.
Value method_value(const Value& object, std::string_view name);

}  // namespace inflight::jinja
