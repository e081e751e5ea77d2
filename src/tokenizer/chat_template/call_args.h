// CallArgs: the arguments of a call, filter or test, and ArgParser to bind them to a Python-style
// signature, e.g. for `x|indent(4, first=true)` against (width=4, first=False, blank=False).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/chat_template/value.h"

namespace inflight::jinja {

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A filter: input | name(args...). A test: input is name(args...).
using FilterFn = Value (*)(Interpreter& interp, const Value& input, const CallArgs& args);
using TestFn = bool (*)(Interpreter& interp, const Value& input, const CallArgs& args);

// Binds positional then keyword arguments to parameter names, as Python does; throws a type
// error naming `what` for too many arguments, unknown or repeated keywords, or a missing
// required parameter (the first `num_required` names).
class ArgParser {
 public:
  ArgParser(std::string_view what, const CallArgs& args,
            std::initializer_list<std::string_view> names, std::size_t num_required = 0);

  bool has(std::size_t i) const { return bound_[i] != nullptr; }
  const Value& get(std::size_t i) const;  // only when has(i)
  Value get_or(std::size_t i, Value fallback) const {
    return has(i) ? get(i) : std::move(fallback);
  }

 private:
  std::vector<const Value*> bound_;
};

}  // namespace inflight::jinja
