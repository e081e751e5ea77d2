// Python's str.format, `"{}: {:>6.2f}".format(name, x)`, as jinja2's sandbox allows it:
// automatic and numbered fields, keyword fields, `[key]` lookups into dicts and lists,
// conversions !s / !r / !a and the format-spec mini-language
// [[fill]align][sign][#][0][width][,|_][.precision][type] for strings, integers and floats.
// Attribute fields (`{0.name}`) and nested fields in a spec are refused by name.
#pragma once

#include <string>
#include <string_view>

#include "tokenizer/chat_template/call_args.h"

namespace inflight::jinja {

// Throws Python's errors: "Replacement index 1 out of range for positional args tuple",
// "cannot switch from automatic field numbering to manual field specification", "KeyError: 'x'",
// "Unknown format code 'd' for object of type 'str'", ...
std::string str_format(std::string_view format, const CallArgs& args);

}  // namespace inflight::jinja
