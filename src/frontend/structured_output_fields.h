// The request fields that constrain the output (structured output), read into one
// StructuredOutput:
//
//   OpenAI   response_format {"type": "json_object"}
//            response_format {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
//            ({"type": "text"} is no constraint)
//   vLLM     guided_json (a schema object or its JSON text), guided_regex, guided_choice (a list
//            of strings), guided_grammar (EBNF), structured_outputs {json | regex | choice |
//            grammar | json_object: true}
//   TGI      grammar {"type": "json" | "regex", "value": schema (object or text) | pattern}
//   tools    tool_choice "required" or {"type": "function", "function": {"name"}}: the output
//            is a JSON list of {"name", "parameters"} calls under the tools' schemas
//
// At most one constraint per request: two are ApiError(400) naming the second field, as is any
// field of the wrong shape. Whether a schema, regex or grammar compiles is checked against the
// model's vocabulary by check_structured_output().
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "inflight/sampling_params.h"

namespace inflight {
class Engine;
}  // namespace inflight

namespace inflight::frontend {

struct ParsedConstraint {
  StructuredOutput constraint;
  std::string field;  // the request field it came from, for errors
};

// OpenAI (chat) completions: response_format, guided_*, structured_outputs.
std::optional<ParsedConstraint> parse_openai_constraint(const nlohmann::ordered_json& body);
// TGI: grammar.
std::optional<ParsedConstraint> parse_tgi_constraint(const nlohmann::ordered_json& parameters);
// tool_choice "required" (every tool allowed, at least one call) or naming `function` (one
// call of it): a JSON list of {"name", "parameters"} objects. `tools` is the request's list.
ParsedConstraint tool_call_constraint(const nlohmann::ordered_json& tools,
                                      const std::optional<std::string>& function);

// Compiles the constraint with the engine (cached there for the request that follows);
// ApiError(400) naming the field when it does not compile.
void check_structured_output(Engine& engine, const ParsedConstraint& parsed);

}  // namespace inflight::frontend
