// The structured-output request fields: which constraint each one makes, the one-constraint
// rule, and the 400s naming the field.
#include "frontend/structured_output_fields.h"

#include <gtest/gtest.h>

#include <functional>

#include "frontend/api_error.h"
#include "frontend/json_fields.h"
#include "frontend/openai_protocol.h"
#include "frontend/tgi_protocol.h"

namespace inflight::frontend {
namespace {

using json = nlohmann::ordered_json;
using Kind = StructuredOutput::Kind;

std::optional<ParsedConstraint> openai(const std::string& body) {
  return parse_openai_constraint(parse_json_object(body));
}

std::string error_param(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  return "(no error)";
}

TEST(StructuredOutputFields, OpenAiAndVllmFields) {
  EXPECT_FALSE(openai(R"({})"));
  EXPECT_FALSE(openai(R"({"response_format":{"type":"text"}})"));
  auto c = openai(R"({"response_format":{"type":"json_object"}})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->constraint.kind, Kind::kJsonObject);
  c = openai(R"({"response_format":{"type":"json_schema","json_schema":{"name":"n",
      "schema":{"type":"object"},"strict":true}}})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->constraint.kind, Kind::kJsonSchema);
  EXPECT_EQ(json::parse(c->constraint.text), json::parse(R"({"type":"object"})"));
  EXPECT_TRUE(c->constraint.strict);
  EXPECT_EQ(c->field, "response_format.json_schema.schema");
  c = openai(R"({"response_format":{"type":"json_schema","json_schema":{"schema":{}}}})");
  EXPECT_TRUE(c->constraint.strict) << "unset: strict, as vLLM";
  c = openai(
      R"({"response_format":{"type":"json_schema","json_schema":{"schema":{},"strict":false}}})");
  EXPECT_FALSE(c->constraint.strict);

  c = openai(R"({"guided_json":"{\"type\":\"integer\"}"})");
  EXPECT_EQ(c->constraint.kind, Kind::kJsonSchema);
  EXPECT_EQ(c->constraint.text, R"({"type":"integer"})");
  EXPECT_EQ(openai(R"({"guided_regex":"a+"})")->constraint.kind, Kind::kRegex);
  EXPECT_EQ(openai(R"({"guided_grammar":"root ::= \"a\""})")->constraint.kind, Kind::kGrammar);
  c = openai(R"({"guided_choice":["a","b"]})");
  EXPECT_EQ(c->constraint.kind, Kind::kChoice);
  EXPECT_EQ(c->constraint.choices, (std::vector<std::string>{"a", "b"}));
  c = openai(R"({"structured_outputs":{"choice":["x"],"disable_any_whitespace":true}})");
  EXPECT_EQ(c->constraint.kind, Kind::kChoice);
  EXPECT_EQ(c->field, "structured_outputs.choice");
  EXPECT_EQ(openai(R"({"structured_outputs":{"json_object":true}})")->constraint.kind,
            Kind::kJsonObject);
}

TEST(StructuredOutputFields, RejectsBadShapesAndTwoConstraints) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"response_format":"json"})", "response_format"},
      {R"({"response_format":{"type":"yaml"}})", "response_format.type"},
      {R"({"response_format":{"type":"json_schema"}})", "response_format.json_schema"},
      {R"({"response_format":{"type":"json_schema","json_schema":{"name":"x"}}})",
       "response_format.json_schema.schema"},
      {R"({"response_format":{"type":"json_schema","json_schema":{"schema":3}}})",
       "response_format.json_schema.schema"},
      {R"({"response_format":{"type":"json_schema","json_schema":{"schema":{},"strict":1}}})",
       "response_format.json_schema.strict"},
      {R"({"guided_json":"{oops"})", "guided_json"},
      {R"({"guided_regex":""})", "guided_regex"},
      {R"({"guided_choice":[1]})", "guided_choice"},
      {R"({"guided_choice":[]})", "guided_choice"},
      {R"({"structured_outputs":[]})", "structured_outputs"},
      {R"({"structured_outputs":{"structural_tag":"{}"}})", "structured_outputs.structural_tag"},
      {R"({"guided_regex":"a","guided_grammar":"root ::= \"a\""})", "guided_grammar"},
      {R"({"response_format":{"type":"json_object"},"structured_outputs":{"regex":"a"}})",
       "structured_outputs.regex"},
  };
  for (const auto& [body, param] : cases) {
    EXPECT_EQ(error_param([&] { openai(body); }), param) << body;
  }
}

TEST(StructuredOutputFields, ToolChoiceForcesAListOfCalls) {
  const json tools = json::parse(R"([
    {"type":"function","function":{"name":"f","parameters":{"type":"object",
      "properties":{"x":{"type":"integer"}}}}},
    {"type":"function","function":{"name":"g"}}])");
  ParsedConstraint any = tool_call_constraint(tools, std::nullopt);
  EXPECT_EQ(any.constraint.kind, Kind::kJsonSchema);
  const json schema = json::parse(any.constraint.text);
  EXPECT_EQ(schema["type"], "array");
  EXPECT_EQ(schema["minItems"], 1);
  EXPECT_FALSE(schema.contains("maxItems"));
  ASSERT_EQ(schema["items"]["anyOf"].size(), 2u);
  EXPECT_EQ(schema["items"]["anyOf"][0]["properties"]["name"]["const"], "f");
  EXPECT_EQ(schema["items"]["anyOf"][1]["properties"]["parameters"]["type"], "object");

  const json named = json::parse(tool_call_constraint(tools, "g").constraint.text);
  EXPECT_EQ(named["maxItems"], 1);
  EXPECT_EQ(named["items"]["properties"]["name"]["const"], "g");
  EXPECT_EQ(error_param([&] { tool_call_constraint(tools, "h"); }), "tool_choice.function.name");
  EXPECT_EQ(error_param([&] { tool_call_constraint(json::array(), std::nullopt); }), "tool_choice");

  ProtocolLimits limits;
  ChatCompletionRequest chat = parse_chat_completion_request(
      parse_json_object(R"({"messages":[{"role":"user","content":"x"}],"tools":[
        {"type":"function","function":{"name":"f"}}],"tool_choice":"required"})"),
      limits);
  EXPECT_TRUE(chat.tool_choice_forced);
  ASSERT_TRUE(chat.options.sampling.structured_output);
  EXPECT_EQ(chat.options.constraint->field, "tool_choice");
}

TEST(StructuredOutputFields, TgiGrammar) {
  auto c = parse_tgi_constraint(json::parse(R"({"grammar":{"type":"json","value":{}}})"));
  EXPECT_EQ(c->constraint.kind, Kind::kJsonSchema);
  c = parse_tgi_constraint(json::parse(R"({"grammar":{"type":"regex","value":"[a-z]+"}})"));
  EXPECT_EQ(c->constraint.kind, Kind::kRegex);
  EXPECT_EQ(c->constraint.text, "[a-z]+");
  EXPECT_FALSE(parse_tgi_constraint(json::parse(R"({})")));
  EXPECT_EQ(error_param([] { parse_tgi_constraint(json::parse(R"({"grammar":"x"})")); }),
            "grammar");
  EXPECT_EQ(error_param([] {
              parse_tgi_constraint(json::parse(R"({"grammar":{"type":"lark","value":"x"}})"));
            }),
            "grammar.type");
  ProtocolLimits limits;
  TgiRequest r = parse_tgi_request(
      parse_json_object(R"({"inputs":"x","parameters":{"grammar":{"type":"regex","value":"a"}}})"),
      limits);
  ASSERT_TRUE(r.sampling.structured_output);
  EXPECT_EQ(r.sampling.structured_output->kind, Kind::kRegex);
}

}  // namespace
}  // namespace inflight::frontend
