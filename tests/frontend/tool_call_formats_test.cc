// The tool-call formats on outputs as models write them (complete, malformed, text before and
// after, several calls), and the stream contract: fed in pieces, every output's deltas add up to
// the whole output's parse, and what is sent is never taken back.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/tool_call_stream.h"
#include "frontend/tool_calls.h"

namespace inflight::frontend {
namespace {

using json = nlohmann::ordered_json;

const json& weather_tools() {
  static const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_current_weather", "parameters": {
      "type": "object", "properties": {
        "city": {"type": "string"}, "state": {"type": "string"},
        "days": {"type": "integer"}, "threshold": {"type": "number"},
        "metric": {"type": "boolean"}, "hours": {"type": "array", "items": {"type": "integer"}},
        "zip": {"type": ["string", "null"]}, "options": {"type": "object"}}}}}])");
  return tools;
}

void expect_call(const ToolCall& call, const std::string& name, const char* arguments) {
  EXPECT_EQ(call.name, name);
  EXPECT_EQ(json::parse(call.arguments), json::parse(arguments)) << call.arguments;
}

// ---- mistral ---------------------------------------------------------------------------------

TEST(ToolCallFormats, MistralJsonList) {
  // Mistral-7B-Instruct-v0.3 and Nemo.
  const ParsedOutput p = parse_tool_calls(
      ToolCallParser::kMistral,
      R"([TOOL_CALLS] [{"name": "get_current_weather", "arguments": {"location": "Paris, France", "format": "celsius"}}, {"name": "get_time", "arguments": {}}])");
  ASSERT_EQ(p.calls.size(), 2u);
  expect_call(p.calls[0], "get_current_weather",
              R"({"location": "Paris, France", "format": "celsius"})");
  expect_call(p.calls[1], "get_time", "{}");
  EXPECT_EQ(p.content, "");
}

TEST(ToolCallFormats, MistralNameArgs) {
  // Mistral Small 3.2 / Magistral / Ministral 3: one [TOOL_CALLS] per call, text before them.
  const ParsedOutput p = parse_tool_calls(
      ToolCallParser::kMistral,
      "I will look both up.[TOOL_CALLS]get_current_weather[ARGS]{\"city\": \"Paris\", "
      "\"unit\": \"celsius\"}[TOOL_CALLS]get_current_weather[CALL_ID]a1b2c3d4e[ARGS]{\"city\": "
      "\"Lyon\"}");
  ASSERT_EQ(p.calls.size(), 2u);
  expect_call(p.calls[0], "get_current_weather", R"({"city": "Paris", "unit": "celsius"})");
  expect_call(p.calls[1], "get_current_weather", R"({"city": "Lyon"})");
  EXPECT_EQ(p.content, "I will look both up.");
}

TEST(ToolCallFormats, MistralMalformedIsContent) {
  for (const char* text : {"No tools needed: Paris is sunny.",
                           "[TOOL_CALLS]get_weather[ARGS]{\"city\": ",  // cut short
                           "[TOOL_CALLS] sorry, I cannot do that",
                           "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": oops}]"}) {
    const ParsedOutput p = parse_tool_calls(ToolCallParser::kMistral, text);
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
  }
}

// ---- qwen3_coder -----------------------------------------------------------------------------

TEST(ToolCallFormats, Qwen3CoderConvertsValuesBySchema) {
  const std::string text =
      "I'll check the weather.\n<tool_call>\n<function=get_current_weather>\n<parameter=city>\n"
      "Dallas\n</parameter>\n<parameter=state>\nTX\n</parameter>\n<parameter=days>\n3\n"
      "</parameter>\n<parameter=threshold>\n0.5\n</parameter>\n<parameter=metric>\ntrue\n"
      "</parameter>\n<parameter=hours>\n[6, 12]\n</parameter>\n<parameter=zip>\n75201\n"
      "</parameter>\n<parameter=options>\n{\"alerts\": false}\n</parameter>\n<parameter=note>\n"
      "two\nlines\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n"
      "</function>\n</tool_call>";
  const ParsedOutput p = parse_tool_calls(ToolCallParser::kQwen3Coder, text, weather_tools());
  ASSERT_EQ(p.calls.size(), 2u);
  expect_call(p.calls[0], "get_current_weather",
              R"({"city": "Dallas", "state": "TX", "days": 3, "threshold": 0.5, "metric": true,
                  "hours": [6, 12], "zip": "75201", "options": {"alerts": false},
                  "note": "two\nlines"})");
  expect_call(p.calls[1], "get_time", "{}");
  EXPECT_EQ(p.content, "I'll check the weather.\n");
  // Without the schema every value is a string.
  expect_call(parse_tool_calls(ToolCallParser::kQwen3Coder, text).calls[0], "get_current_weather",
              R"({"city": "Dallas", "state": "TX", "days": "3", "threshold": "0.5",
                  "metric": "true", "hours": "[6, 12]", "zip": "75201",
                  "options": "{\"alerts\": false}", "note": "two\nlines"})");
}

TEST(ToolCallFormats, Qwen3CoderLenientAndMalformed) {
  // A value that does not fit its type stays a string; a missing </parameter> ends at the next
  // tag; a call cut short by max_tokens keeps what came.
  ParsedOutput p = parse_tool_calls(
      ToolCallParser::kQwen3Coder,
      "<tool_call>\n<function=get_current_weather>\n<parameter=days>\nthree\n<parameter=city>\n"
      "Austin\n</function>\n</tool_call> Done.",
      weather_tools());
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_current_weather", R"({"days": "three", "city": "Austin"})");
  EXPECT_EQ(p.content, " Done.");
  p = parse_tool_calls(ToolCallParser::kQwen3Coder,
                       "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nAus",
                       weather_tools());
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_current_weather", R"({"city": "Aus"})");
  for (const char* text : {"<tool_call>{\"name\": \"f\"}</tool_call>", "plain <b>text</b>"}) {
    p = parse_tool_calls(ToolCallParser::kQwen3Coder, text, weather_tools());
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
  }
}

TEST(ToolCallFormats, SeedOssIsQwen3CoderInItsOwnTags) {
  const std::string text =
      "<seed:think>none</seed:think>Checking.\n<seed:tool_call>\n<function=get_current_weather>"
      "\n<parameter=city>Dallas</parameter>\n<parameter=days>3</parameter>\n</function>\n"
      "</seed:tool_call>";
  ParsedOutput p = parse_tool_calls(ToolCallParser::kSeedOss, text, weather_tools());
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_current_weather", R"({"city": "Dallas", "days": 3})");
  EXPECT_EQ(p.content, "<seed:think>none</seed:think>Checking.\n");
  // Qwen3-Coder's tags are text to it, and its tags text to qwen3_coder.
  p = parse_tool_calls(ToolCallParser::kQwen3Coder, text, weather_tools());
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, text);
}

// ---- glm45 -----------------------------------------------------------------------------------

TEST(ToolCallFormats, Glm45PairsWithAndWithoutNewlines) {
  // GLM-4.5/4.6 put each part on its line, GLM-4.7 writes them back to back; strings as they
  // are, other values as JSON (the templates' rendering).
  const std::string text =
      "Let me look.\n<tool_call>get_current_weather\n<arg_key>city</arg_key>\n<arg_value>Dallas"
      "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>hours</arg_key>"
      "\n<arg_value>[6, 12]</arg_value>\n<arg_key>zip</arg_key>\n<arg_value>75201</arg_value>\n"
      "</tool_call><tool_call>get_time<arg_key>zone</arg_key><arg_value>\"UTC\"</arg_value>"
      "<arg_key>utc</arg_key><arg_value>true</arg_value></tool_call>"
      "<tool_call>get_date</tool_call>";
  ParsedOutput p = parse_tool_calls(ToolCallParser::kGlm45, text, weather_tools());
  ASSERT_EQ(p.calls.size(), 3u);
  expect_call(p.calls[0], "get_current_weather",
              R"({"city": "Dallas", "days": 3, "hours": [6, 12], "zip": "75201"})");
  // get_time has no schema: a value is JSON when it reads as JSON.
  expect_call(p.calls[1], "get_time", R"({"zone": "UTC", "utc": true})");
  expect_call(p.calls[2], "get_date", "{}");
  EXPECT_EQ(p.content, "Let me look.\n");
  // A string parameter keeps text that would read as JSON.
  p = parse_tool_calls(ToolCallParser::kGlm45,
                       "<tool_call>get_current_weather<arg_key>city</arg_key><arg_value>null"
                       "</arg_value><arg_key>days</arg_key><arg_value>three</arg_value>"
                       "</tool_call>",
                       weather_tools());
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_current_weather", R"({"city": "null", "days": "three"})");
}

TEST(ToolCallFormats, Glm45CutShortAndMalformed) {
  ParsedOutput p = parse_tool_calls(
      ToolCallParser::kGlm45,
      "<tool_call>get_current_weather\n<arg_key>city</arg_key>\n<arg_value>Aus", weather_tools());
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_current_weather", R"({"city": "Aus"})");
  for (const char* text : {"<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
                           "<tool_call>f\n<arg_key>a</arg_key> oops</tool_call>",
                           "<tool_call>f\nplain words</tool_call>", "<tool_call>", "a <b>c</b>"}) {
    p = parse_tool_calls(ToolCallParser::kGlm45, text, weather_tools());
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
  }
}

// ---- special-token sections: kimi_k2, deepseek_v31, deepseek_v3 ------------------------------

TEST(ToolCallFormats, KimiK2SectionOfCalls) {
  const std::string text =
      "Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_current_weather:0"
      "<|tool_call_argument_begin|>{\"city\": \"Paris\", \"days\": 2}<|tool_call_end|>"
      "<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
      "<|tool_calls_section_end|>";
  const ParsedOutput p = parse_tool_calls(ToolCallParser::kKimiK2, text);
  ASSERT_EQ(p.calls.size(), 2u);
  expect_call(p.calls[0], "get_current_weather", R"({"city": "Paris", "days": 2})");
  EXPECT_EQ(p.calls[0].arguments, R"({"city": "Paris", "days": 2})");  // as the model wrote it
  expect_call(p.calls[1], "get_time", "{}");
  EXPECT_EQ(p.content, "Let me check.");
  // Not calls: an id without its index, arguments that are not an object.
  for (const char* bad :
       {"<|tool_calls_section_begin|><|tool_call_begin|>get_time<|tool_call_argument_begin|>{}"
        "<|tool_call_end|><|tool_calls_section_end|>",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
        "[1]<|tool_call_end|><|tool_calls_section_end|>"}) {
    const ParsedOutput q = parse_tool_calls(ToolCallParser::kKimiK2, bad);
    EXPECT_TRUE(q.calls.empty()) << bad;
    EXPECT_EQ(q.content, bad);
  }
}

TEST(ToolCallFormats, DeepSeekV31AndV3) {
  ParsedOutput p = parse_tool_calls(
      ToolCallParser::kDeepSeekV31,
      "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_current_weather<｜tool▁sep｜>{\"city\": "
      "\"Rome\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
      "<｜tool▁calls▁end｜> Done.");
  ASSERT_EQ(p.calls.size(), 2u);
  expect_call(p.calls[0], "get_current_weather", R"({"city": "Rome"})");
  expect_call(p.calls[1], "get_time", "{}");
  EXPECT_EQ(p.content, "Sure. Done.");
  p = parse_tool_calls(ToolCallParser::kDeepSeekV3,
                       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
                       "get_current_weather\n```json\n{\"city\": \"Rome\"}\n```"
                       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_current_weather", R"({"city": "Rome"})");
  EXPECT_EQ(p.content, "");
  // V3.1's calls are not V3's (no type, no fence), and the other way round.
  p = parse_tool_calls(ToolCallParser::kDeepSeekV3,
                       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}"
                       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  EXPECT_TRUE(p.calls.empty());
  // Cut short by max_tokens inside the arguments: not a call.
  const std::string cut = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1";
  p = parse_tool_calls(ToolCallParser::kDeepSeekV31, cut);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, cut);
}

// ---- pythonic --------------------------------------------------------------------------------

TEST(ToolCallFormats, PythonicLists) {
  // Llama 3.2 with vLLM's pythonic template.
  ParsedOutput p = parse_tool_calls(
      ToolCallParser::kPythonic,
      "[get_current_weather(city='San Francisco', metric=True, hours=[6, 12], zip=None, "
      "options={'alerts': False, \"depth\": -1.5}), get_time()]");
  ASSERT_EQ(p.calls.size(), 2u);
  expect_call(p.calls[0], "get_current_weather",
              R"({"city": "San Francisco", "metric": true, "hours": [6, 12], "zip": null,
                  "options": {"alerts": false, "depth": -1.5}})");
  expect_call(p.calls[1], "get_time", "{}");
  EXPECT_EQ(p.content, "");
  // Llama 4.
  p = parse_tool_calls(ToolCallParser::kPythonic,
                       "<|python_start|>[get_current_weather(city=\"Boston\", days=2)]"
                       "<|python_end|>");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_current_weather", R"({"city": "Boston", "days": 2})");
  // LFM2: text around <|tool_call_start|>...<|tool_call_end|>.
  p = parse_tool_calls(ToolCallParser::kPythonic,
                       "Let me look.<|tool_call_start|>[get_candidate_status(candidate_id="
                       "\"12345\")]<|tool_call_end|>Checking candidate 12345.");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_candidate_status", R"({"candidate_id": "12345"})");
  EXPECT_EQ(p.content, "Let me look.Checking candidate 12345.");
}

TEST(ToolCallFormats, PythonicMalformedIsContent) {
  for (const char* text : {"The answer is 4.", "[1, 2, 3]", "[f(1, 2)]", "[get_time(",
                           "[f(a=undefined_name)]", "[link](https://example.com)"}) {
    const ParsedOutput p = parse_tool_calls(ToolCallParser::kPythonic, text);
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
  }
}

// ---- streaming -------------------------------------------------------------------------------

struct StreamCase {
  ToolCallParser parser;
  std::string text;
  size_t num_calls;  // in the whole text
};

std::vector<StreamCase> stream_cases() {
  return {
      {ToolCallParser::kHermes,
       "Let me check.\n<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": "
       "{\"city\": \"San Francisco, CA\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": "
       "\"get_time\", \"arguments\": {}}\n</tool_call>",
       2},
      {ToolCallParser::kHermes, "a <tool_call>{\"name\": oops}</tool_call> and <b>more</b>", 0},
      {ToolCallParser::kLlama3Json,
       "<|python_tag|>{\"name\": \"get_current_weather\", \"parameters\": {\"city\": \"Paris\"}}; "
       "{\"name\": \"get_time\", \"parameters\": {}}",
       2},
      {ToolCallParser::kLlama3Json, "The capital of France is Paris.", 0},
      {ToolCallParser::kMistral,
       "Sure.[TOOL_CALLS]get_current_weather[ARGS]{\"city\": \"Paris\", \"days\": [1, 2]}"
       "[TOOL_CALLS]get_time[ARGS]{}",
       2},
      {ToolCallParser::kMistral,
       "[TOOL_CALLS] [{\"name\": \"get_current_weather\", \"arguments\": {\"city\": \"Rome\"}}]",
       1},
      {ToolCallParser::kQwen3Coder,
       "Checking.\n<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n"
       "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
       1},
      {ToolCallParser::kQwen3Coder,  // </function> and one </parameter> omitted
       "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nOslo\n<parameter=days>"
       "\n2\n</parameter>\n</tool_call> ok",
       1},
      {ToolCallParser::kSeedOss,
       "Checking.\n<seed:tool_call>\n<function=get_current_weather>\n<parameter=city>Oslo"
       "</parameter>\n</function>\n</seed:tool_call>",
       1},
      {ToolCallParser::kGlm45,
       "Checking.\n<tool_call>get_current_weather\n<arg_key>city</arg_key>\n<arg_value>Dallas"
       "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
       "<tool_call>get_time<arg_key>zone</arg_key><arg_value>UTC</arg_value></tool_call> ok",
       2},
      {ToolCallParser::kGlm45, "a <tool_call>f\nplain words</tool_call> and <b>more</b>", 0},
      {ToolCallParser::kKimiK2,
       "Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_current_weather:0"
       "<|tool_call_argument_begin|>{\"city\": \"Oslo\", \"hours\": [6, 12]}<|tool_call_end|>"
       "<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
       "<|tool_calls_section_end|>",
       2},
      {ToolCallParser::kDeepSeekV31,
       "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_current_weather<｜tool▁sep｜>{\"city\":"
       " "
       "\"Rome\", \"days\": 3}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       1},
      {ToolCallParser::kDeepSeekV3,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_current_weather\n"
       "```json\n{\"city\": \"Rome\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       1},
      {ToolCallParser::kDeepSeekV31, "No <｜tool▁calls▁begin｜> here, just <b>text</b>.", 0},
      {ToolCallParser::kPythonic, "[get_current_weather(city='Paris', hours=[6, 12]), get_time()]",
       2},
      {ToolCallParser::kPythonic,
       "Looking.<|tool_call_start|>[get_time(zone=\"UTC\")]<|tool_call_end|>Done.", 1},
      {ToolCallParser::kHermes,
       "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>\n\n"
       "Done, see above.\n<tool_call>\n{\"arguments\": {\"b\": [1, {\"c\": \"}\"}]}, "
       "\"name\": \"g\"}\n</tool_call>",
       2},
      {ToolCallParser::kMistral, "[TOOL_CALLS]f[ARGS]{\"a\": {\"b\": \"]\"}} and done.", 1},
      {ToolCallParser::kMistral, "Use [brackets] freely; [TOOL_CALLS is not a marker.", 0},
      {ToolCallParser::kPythonic,
       "<|python_start|>[get_time(zone='UTC'), f(s=\"a, b) c\", t=(1, 2))]<|python_end|>", 2},
      {ToolCallParser::kLlama3Json, "  {\"name\": \"f\", \"parameters\": {\"x\": \"{;}\"}} ; ", 1},
      {ToolCallParser::kJsonList,
       "[{\"name\": \"get_current_weather\", \"parameters\": {\"city\": \"Oslo\"}}]", 1},
  };
}

TEST(ToolCallFormats, StreamedDeltasAddUpToTheWholeParse) {
  for (const StreamCase& c : stream_cases()) {
    const ParsedOutput whole = parse_tool_calls(c.parser, c.text, weather_tools());
    ASSERT_EQ(whole.calls.size(), c.num_calls) << c.text;
    for (const ToolCall& call : whole.calls) {
      EXPECT_TRUE(json::parse(call.arguments).is_object()) << call.arguments;
    }
    for (size_t piece : {1, 3, 7}) {
      ToolCallStream stream(c.parser, weather_tools());
      std::string content;
      std::vector<ToolCall> calls;
      for (size_t at = 0; at < c.text.size(); at += piece) {
        const ToolCallDelta d =
            stream.add(std::string_view(c.text).substr(at, piece), at + piece >= c.text.size());
        content += d.content;
        for (const ToolCallDelta::Call& call : d.calls) {
          if (call.first) {
            ASSERT_EQ(call.index, calls.size()) << c.text;
            EXPECT_TRUE(call.arguments.empty());
            calls.push_back({call.name, {}});
          } else {
            ASSERT_LT(call.index, calls.size()) << c.text;
            calls[call.index].arguments += call.arguments;
          }
        }
      }
      EXPECT_EQ(content, whole.content) << c.text << " in pieces of " << piece;
      ASSERT_EQ(calls.size(), whole.calls.size()) << c.text;
      for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(calls[i].name, whole.calls[i].name);
        EXPECT_EQ(calls[i].arguments, whole.calls[i].arguments) << c.text;
      }
    }
  }
}

TEST(ToolCallFormats, StreamSendsArgumentsBeforeTheCallEnds) {
  ToolCallStream stream(ToolCallParser::kQwen3Coder, weather_tools());
  EXPECT_EQ(stream.add("Sure. <tool_", false).content, "Sure. ");  // a possible tag: held
  ToolCallDelta d = stream.add("call>\n<function=get_current_weather>\n", false);
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_TRUE(d.calls[0].first);
  EXPECT_EQ(d.calls[0].name, "get_current_weather");
  d = stream.add("<parameter=days>\n3\n</parameter>\n<parameter=city>\nDal", false);
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, "{\"days\": 3");
  d = stream.add("las\n</parameter>\n</function>\n</tool_call>", true);
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, ", \"city\": \"Dallas\"}");
}

}  // namespace
}  // namespace inflight::frontend
