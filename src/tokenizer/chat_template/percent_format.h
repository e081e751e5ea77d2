// Python's printf-style string formatting, `"%s: %d" % (name, n)`, which both the `%` operator
// on strings and jinja2's |format filter use.
#pragma once

#include <string>
#include <string_view>

#include "tokenizer/chat_template/value.h"

namespace inflight::jinja {

// `args` is a tuple (one value per conversion), a dict (for %(name)s) or a single value.
// Throws Python's errors: "not enough arguments for format string", "not all arguments
// converted during string formatting", "%d format: a real number is required, not str", ...
std::string percent_format(std::string_view format, const Value& args);

}  // namespace inflight::jinja
