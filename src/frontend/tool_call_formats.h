// The tool-call formats behind parse_tool_calls (tool_calls.h), one function each, and the text
// and JSON scanning they share. Each takes the output so far (or whole, at_end) and returns what
// is decided, with the contract of parse_tool_calls.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "frontend/tool_calls.h"

namespace inflight::frontend::tool_call_formats {

ParsedOutput parse_hermes(std::string_view text, bool at_end);
ParsedOutput parse_llama3_json(std::string_view text, bool at_end);
ParsedOutput parse_mistral(std::string_view text, bool at_end);
ParsedOutput parse_json_list(std::string_view text, bool at_end);
ParsedOutput parse_qwen3_coder(std::string_view text, const nlohmann::ordered_json& tools,
                               bool at_end);
ParsedOutput parse_seed_oss(std::string_view text, const nlohmann::ordered_json& tools,
                            bool at_end);
ParsedOutput parse_glm45(std::string_view text, const nlohmann::ordered_json& tools, bool at_end);
ParsedOutput parse_kimi_k2(std::string_view text, bool at_end);
ParsedOutput parse_deepseek_v3(std::string_view text, bool at_end);
ParsedOutput parse_deepseek_v31(std::string_view text, bool at_end);
ParsedOutput parse_pythonic(std::string_view text, bool at_end);

// ---- shared scanning -------------------------------------------------------------------------

// Where a scan stands: the construct is complete, runs past the end of the text, or is not one.
enum class Scan { kDone, kOpen, kBad };

std::string_view trim(std::string_view s);
// The first index at or after `i` that is not JSON whitespace (text.size() if none).
size_t skip_space(std::string_view text, size_t i);
// How many trailing characters of `text` may be the start of `marker` split across tokens
// (a proper prefix of it), to be held back.
size_t partial_marker(std::string_view text, std::string_view marker);
// Whether `text` (what follows a position) could still grow into `marker`.
bool may_become(std::string_view text, std::string_view marker);

// Adds text found outside calls to out.content. After a call, whitespace alone is dropped (the
// separators between calls; trailing whitespace that grows into text is added whole by a later
// parse, which sees the whole output again).
void add_content(ParsedOutput& out, std::string_view segment);
// Text after the last call (or all of it without calls) as add_content does, holding back a
// tail that may be the start of `marker` split across tokens (unless at_end).
void add_trailing(ParsedOutput& out, std::string_view rest, std::string_view marker, bool at_end);
// The output as content, no calls.
ParsedOutput all_content(std::string_view text);
// ---- typed values (the XML formats, whose values are text) --------------------------------

// The `properties` of the `parameters` schema of the tool named `name` in a request's tools
// (nullptr when it has none, or there is no such tool).
const nlohmann::ordered_json* tool_properties(const nlohmann::ordered_json& tools,
                                              std::string_view name);
// The schema type name of `param` ("string", "integer", ...); for a list of types the first
// that is not "null"; "" when it has none.
std::string schema_type(const nlohmann::ordered_json* properties, const std::string& param);
// A value's text as the JSON value its schema type asks for; text that does not convert stays a
// string (the client's validation names it), as does a value of no type ("").
nlohmann::ordered_json param_value(const std::string& text, const std::string& type);

// `value` as JSON text; bytes of a string that are not UTF-8 (a model may emit any) become U+FFFD.
std::string json_text(const nlohmann::ordered_json& value);

// One JSON call object {"name": "f", "arguments" | "parameters": {...}} at the start of `text`:
// kDone with the call and `end` (one past its '}'); kOpen with the call so far once its name
// and an object of arguments have begun (arguments: their text so far); kBad.
struct JsonCall {
  Scan scan = Scan::kBad;
  std::optional<ToolCall> call;
  size_t end = 0;
};
JsonCall read_json_call(std::string_view text);

// A JSON list of call objects at the start of `text` ('['): kDone with `end` (one past ']'),
// kOpen with the calls so far, or kBad.
struct JsonCallList {
  Scan scan = Scan::kBad;
  std::vector<ToolCall> calls;
  size_t end = 0;
};
JsonCallList read_json_call_list(std::string_view text);

// The end of the JSON value starting at text[i] (strings, nesting and escapes honoured): kDone
// with `end`, kOpen when it runs past the text, kBad when no value starts there.
struct JsonValueEnd {
  Scan scan = Scan::kBad;
  size_t end = 0;
};
JsonValueEnd json_value_end(std::string_view text, size_t i);

}  // namespace inflight::frontend::tool_call_formats
