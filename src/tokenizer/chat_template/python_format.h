// How Python prints values, for byte-identical output with jinja2:
//   to_str   str(x):  what {{ x }}, ~ and |string produce (True, None, 1.0, ['a', 1], {'k': 'v'})
//   to_repr  repr(x): strings quoted and escaped as Python does, inside containers
//   to_json  json.dumps(x, ...): what transformers' tojson filter produces
#pragma once

#include <optional>
#include <string>

#include "tokenizer/chat_template/value.h"

namespace inflight::jinja {

std::string to_str(const Value& value);
void append_str(std::string& out, const Value& value);
std::string to_repr(const Value& value);

// Python float repr: shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string format_float(double value);

// json.dumps options (transformers' tojson defaults: ensure_ascii=False, no indent).
struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          // per-level indent; nullopt: one line
  std::optional<std::string> item_separator;  // default ", " (one line) or "," (indented)
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// Throws a type error for values JSON cannot hold (undefined, namespace, callable), as Python.
std::string to_json(const Value& value, const JsonOptions& options = {});

}  // namespace inflight::jinja
