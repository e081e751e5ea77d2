// The built-in filters, tests and global functions, looked up by name.
//
// Filters and tests follow jinja2's (transformers overrides tojson with json.dumps keeping
// non-ASCII); globals are jinja2's (range, namespace, dict, cycler, joiner) plus transformers'
// raise_exception(message) and strftime_now(format).
#pragma once

#include <string_view>

#include "tokenizer/chat_template/call_args.h"
#include "tokenizer/chat_template/value.h"

namespace inflight::jinja {

FilterFn find_filter(std::string_view name);  // nullptr if not implemented
TestFn find_test(std::string_view name);      // nullptr if not implemented
// Whether jinja2 itself knows the name (implemented here or not): distinguishes "unsupported"
// from "no such filter".
bool is_jinja_filter(std::string_view name);
bool is_jinja_test(std::string_view name);
// A global function, or undefined.
Value find_global(std::string_view name);

// Filter and test tables live in filters.cc and value_tests.cc; globals in globals.cc.
FilterFn find_filter_impl(std::string_view name);
TestFn find_test_impl(std::string_view name);

}  // namespace inflight::jinja
