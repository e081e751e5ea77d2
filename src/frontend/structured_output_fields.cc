#include "frontend/structured_output_fields.h"

#include <fmt/format.h>

#include "frontend/api_error.h"
#include "inflight/engine.h"

namespace inflight::frontend {

using json = nlohmann::ordered_json;
using Kind = StructuredOutput::Kind;

namespace {

// A schema given as an object or as its JSON text, as JSON text.
std::string schema_text(const json& value, const std::string& field) {
  if (value.is_object()) return value.dump();
  if (value.is_string()) {
    const json parsed = json::parse(value.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_object()) {
      throw_bad_request(
          fmt::format("'{}' must be a JSON schema (an object, or its JSON text)", field), field);
    }
    return value.get<std::string>();
  }
  throw_bad_request(fmt::format("'{}' must be a JSON schema (an object, or its JSON text)", field),
                    field);
}

std::string nonempty_string(const json& value, const std::string& field) {
  if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
    throw_bad_request(fmt::format("'{}' must be a non-empty string", field), field);
  }
  return value.get<std::string>();
}

std::vector<std::string> choice_list(const json& value, const std::string& field) {
  if (!value.is_array() || value.empty()) {
    throw_bad_request(fmt::format("'{}' must be a non-empty list of strings", field), field);
  }
  std::vector<std::string> out;
  for (const json& c : value) {
    if (!c.is_string()) {
      throw_bad_request(fmt::format("'{}' must be a non-empty list of strings", field), field);
    }
    out.push_back(c.get<std::string>());
  }
  return out;
}

ParsedConstraint make(Kind kind, std::string text, std::string field) {
  ParsedConstraint p;
  p.constraint.kind = kind;
  p.constraint.text = std::move(text);
  p.field = std::move(field);
  return p;
}

// Keeps the one constraint of a request: a second is an error naming both fields.
void add(std::optional<ParsedConstraint>& out, ParsedConstraint next) {
  if (out) {
    throw_bad_request(fmt::format("'{}' and '{}' both constrain the output: give at most one",
                                  out->field, next.field),
                      next.field);
  }
  out = std::move(next);
}

std::optional<ParsedConstraint> response_format(const json& format) {
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) {
    throw_bad_request("'response_format' must be an object with a string 'type'",
                      "response_format");
  }
  const std::string& type = format["type"].get_ref<const std::string&>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    // TGI's form (what huggingface_hub sends for a json_schema): the schema in "value".
    if (const auto value = format.find("value"); value != format.end() && !value->is_null()) {
      return make(Kind::kJsonSchema, schema_text(*value, "response_format.value"),
                  "response_format.value");
    }
    return make(Kind::kJsonObject, "", "response_format");
  }
  if (type != "json_schema") {
    throw_bad_request(fmt::format("'response_format.type' must be \"text\", \"json_object\" or "
                                  "\"json_schema\", got \"{}\"",
                                  type),
                      "response_format.type");
  }
  const auto it = format.find("json_schema");
  if (it == format.end() || !it->is_object()) {
    throw_bad_request("'response_format.json_schema' must be an object with a 'schema'",
                      "response_format.json_schema");
  }
  // OpenAI's name is required there; it is not needed to constrain anything here.
  const auto schema = it->find("schema");
  if (schema == it->end()) {
    throw_bad_request("'response_format.json_schema.schema' is required",
                      "response_format.json_schema.schema");
  }
  ParsedConstraint p =
      make(Kind::kJsonSchema, schema_text(*schema, "response_format.json_schema.schema"),
           "response_format.json_schema.schema");
  if (const auto strict = it->find("strict"); strict != it->end() && !strict->is_null()) {
    if (!strict->is_boolean()) {
      throw_bad_request("'response_format.json_schema.strict' must be a boolean",
                        "response_format.json_schema.strict");
    }
    p.constraint.strict = strict->get<bool>();
  } else {
    // Unset: strict, as vLLM compiles every schema (OpenAI's own default is false, which lets a
    // model add properties the schema does not list, and small models then ramble).
    p.constraint.strict = true;
  }
  return p;
}

// vLLM's structured_outputs (and guided_decoding_params' field names).
void structured_outputs(const json& so, std::optional<ParsedConstraint>& out) {
  if (!so.is_object()) {
    throw_bad_request("'structured_outputs' must be an object", "structured_outputs");
  }
  for (const auto& [key, value] : so.items()) {
    if (value.is_null()) continue;
    const std::string field = "structured_outputs." + key;
    if (key == "json") {
      add(out, make(Kind::kJsonSchema, schema_text(value, field), field));
    } else if (key == "regex") {
      add(out, make(Kind::kRegex, nonempty_string(value, field), field));
    } else if (key == "choice") {
      ParsedConstraint p = make(Kind::kChoice, "", field);
      p.constraint.choices = choice_list(value, field);
      add(out, std::move(p));
    } else if (key == "grammar") {
      add(out, make(Kind::kGrammar, nonempty_string(value, field), field));
    } else if (key == "json_object") {
      if (!value.is_boolean()) throw_bad_request("'" + field + "' must be a boolean", field);
      if (value.get<bool>()) add(out, make(Kind::kJsonObject, "", field));
    } else if (key == "structural_tag") {
      throw_bad_request("'structured_outputs.structural_tag' is not supported", field);
    }  // other keys (backend options, whitespace pattern) change nothing here
  }
}

// A tool's function object, checked.
const json& tool_function(const json& tool, size_t i) {
  const std::string field = fmt::format("tools[{}]", i);
  if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object() ||
      !tool["function"].contains("name") || !tool["function"]["name"].is_string()) {
    throw_bad_request("each tool must be {\"type\": \"function\", \"function\": {\"name\", ...}}",
                      field);
  }
  return tool["function"];
}

// {"name": const, "parameters": the function's schema}, both required.
json call_schema(const json& function) {
  json parameters = function.contains("parameters") && function["parameters"].is_object()
                        ? function["parameters"]
                        : json{{"type", "object"}};
  return {{"type", "object"},
          {"properties", {{"name", {{"const", function["name"]}}}, {"parameters", parameters}}},
          {"required", {"name", "parameters"}}};
}

}  // namespace

std::optional<ParsedConstraint> parse_openai_constraint(const json& body) {
  std::optional<ParsedConstraint> out;
  if (const auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    if (auto p = response_format(*it)) add(out, std::move(*p));
  }
  if (const auto it = body.find("guided_json"); it != body.end() && !it->is_null()) {
    add(out, make(Kind::kJsonSchema, schema_text(*it, "guided_json"), "guided_json"));
  }
  if (const auto it = body.find("guided_regex"); it != body.end() && !it->is_null()) {
    add(out, make(Kind::kRegex, nonempty_string(*it, "guided_regex"), "guided_regex"));
  }
  if (const auto it = body.find("guided_choice"); it != body.end() && !it->is_null()) {
    ParsedConstraint p = make(Kind::kChoice, "", "guided_choice");
    p.constraint.choices = choice_list(*it, "guided_choice");
    add(out, std::move(p));
  }
  if (const auto it = body.find("guided_grammar"); it != body.end() && !it->is_null()) {
    add(out, make(Kind::kGrammar, nonempty_string(*it, "guided_grammar"), "guided_grammar"));
  }
  if (const auto it = body.find("structured_outputs"); it != body.end() && !it->is_null()) {
    structured_outputs(*it, out);
  }
  return out;
}

std::optional<ParsedConstraint> parse_tgi_constraint(const json& parameters) {
  const auto it = parameters.find("grammar");
  if (it == parameters.end() || it->is_null()) return std::nullopt;
  const json& g = *it;
  if (!g.is_object() || !g.contains("type") || !g["type"].is_string() || !g.contains("value")) {
    throw_bad_request("'grammar' must be {\"type\": \"json\" | \"regex\", \"value\": ...}",
                      "grammar");
  }
  const std::string& type = g["type"].get_ref<const std::string&>();
  if (type == "json" || type == "json_schema") {
    return make(Kind::kJsonSchema, schema_text(g["value"], "grammar.value"), "grammar.value");
  }
  if (type == "regex") {
    return make(Kind::kRegex, nonempty_string(g["value"], "grammar.value"), "grammar.value");
  }
  throw_bad_request(fmt::format("'grammar.type' must be \"json\" or \"regex\", got \"{}\"", type),
                    "grammar.type");
}

ParsedConstraint tool_call_constraint(const json& tools,
                                      const std::optional<std::string>& function) {
  if (!tools.is_array() || tools.empty()) {
    throw_bad_request("'tool_choice' \"required\" or a named function needs 'tools'",
                      "tool_choice");
  }
  json calls = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& f = tool_function(tools[i], i);
    if (!function || f["name"] == *function) calls.push_back(call_schema(f));
  }
  json items;
  if (function) {
    if (calls.empty()) {
      throw_bad_request(
          fmt::format("'tool_choice' names function '{}', which is not in 'tools'", *function),
          "tool_choice.function.name");
    }
    items = calls[0];
  } else {
    items = calls.size() == 1 ? calls[0] : json{{"anyOf", calls}};
  }
  json schema = {{"type", "array"}, {"items", std::move(items)}, {"minItems", 1}};
  if (function) schema["maxItems"] = 1;
  return make(Kind::kJsonSchema, schema.dump(), "tool_choice");
}

void check_structured_output(Engine& engine, const ParsedConstraint& parsed) {
  const Status s = engine.check_structured_output(parsed.constraint);
  if (s.ok()) return;
  if (s.code() == StatusCode::kInvalidArgument) {
    throw_bad_request(fmt::format("'{}': {}", parsed.field, s.message()), parsed.field);
  }
  throw ApiError(s.code() == StatusCode::kUnsupported ? 400 : 500,
                 fmt::format("'{}': {}", parsed.field, s.message()), parsed.field);
}

}  // namespace inflight::frontend
