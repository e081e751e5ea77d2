// Tool calls out of chat outputs: hermes, llama3_json and json_list on whole texts, the chat
// stream's deltas, and the parser each real chat template calls for. The other formats:
// tool_call_formats_test.cc.
#include "frontend/tool_calls.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <optional>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "frontend/openai_responses.h"
#include "test_data.h"

namespace inflight::frontend {
namespace {

using json = nlohmann::ordered_json;

TEST(ToolCalls, HermesBlocksBecomeCallsAndTheRestContent) {
  const ParsedOutput p = parse_tool_calls(
      ToolCallParser::kHermes,
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(p.calls[1].name, "now");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  EXPECT_EQ(p.content, "Let me check.\n");  // as written (a whole response trims it)
}

TEST(ToolCalls, HermesKeepsWhatIsNotACallAsContent) {
  const std::string broken = "a <tool_call>{\"name\": oops}</tool_call> b";
  EXPECT_TRUE(parse_tool_calls(ToolCallParser::kHermes, broken).calls.empty());
  EXPECT_EQ(parse_tool_calls(ToolCallParser::kHermes, broken).content, broken);
  EXPECT_EQ(parse_tool_calls(ToolCallParser::kHermes, "plain text").content, "plain text");
  // Stopped before the closing tag: still a call.
  const ParsedOutput open =
      parse_tool_calls(ToolCallParser::kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {}}");
  ASSERT_EQ(open.calls.size(), 1u);
  EXPECT_EQ(open.content, "");
}

TEST(ToolCalls, Llama3JsonIsTheWholeOutput) {
  const ParsedOutput p = parse_tool_calls(
      ToolCallParser::kLlama3Json,
      "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"a;b {c}\"}}; "
      "{\"name\": \"now\", \"parameters\": {}}");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "search");
  EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(R"({"q": "a;b {c}"})"));
  EXPECT_EQ(p.calls[1].name, "now");
  EXPECT_TRUE(p.content.empty());
  for (const char* text : {"The answer is {42}.", "{\"name\": \"f\"} and more", "{\"no\": 1}"}) {
    const ParsedOutput c = parse_tool_calls(ToolCallParser::kLlama3Json, text);
    EXPECT_TRUE(c.calls.empty()) << text;
    EXPECT_EQ(c.content, text);
  }
}

// Stream events as JSON (without the final [DONE]).
std::vector<json> parsed(const std::vector<std::string>& events) {
  std::vector<json> out;
  for (const std::string& e : events) {
    if (e != kStreamDone) out.push_back(json::parse(e));
  }
  return out;
}

TEST(ToolCalls, ChatStreamSendsContentThenTheCallAsDeltas) {
  ChatFormat format;
  format.meta.id = "chatcmpl-x";
  format.tool_parser = ToolCallParser::kHermes;
  auto stream = chat_stream_formatter(format);
  std::vector<std::string> events;
  const std::vector<std::string> pieces = {
      "Checking", " now. <tool", "_call>{\"name\": \"f\", ", "\"arguments\": {\"x\": ",
      "1}}",      "</tool_call>"};
  std::vector<size_t> events_after;  // events sent after each piece
  for (size_t i = 0; i < pieces.size(); ++i) {
    TaggedOutput t;
    t.output.text = pieces[i];
    if (i + 1 == pieces.size()) {
      t.output.finish_reason = FinishReason::kStop;
      t.output.request_finished = true;
    }
    stream->on_output(t, events);
    events_after.push_back(events.size());
  }
  stream->on_end(events);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), kStreamDone);
  std::string content;
  std::vector<json> calls;
  std::string arguments, finish;
  for (const json& e : parsed(events)) {
    const json& choice = e["choices"][0];
    const json& delta = choice["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      ASSERT_EQ(delta["tool_calls"].size(), 1u);
      const json& call = delta["tool_calls"][0];
      EXPECT_EQ(call["index"], 0);
      if (call.contains("id")) calls.push_back(call);
      arguments += call["function"]["arguments"].get<std::string>();
    }
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(content, "Checking now. ");
  ASSERT_EQ(calls.size(), 1u);  // one first delta: id, type, name, empty arguments
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_TRUE(calls[0]["id"].get<std::string>().starts_with("call_"));
  EXPECT_EQ(calls[0]["function"]["name"], "f");
  EXPECT_EQ(calls[0]["function"]["arguments"], "");
  EXPECT_EQ(json::parse(arguments), json::parse(R"({"x": 1})"));
  EXPECT_EQ(finish, "tool_calls");
  // The arguments began before the call closed: the name came with the third piece, the first
  // fragment with the fourth, the rest with the fifth.
  EXPECT_GT(events_after[3], events_after[2]);
  EXPECT_GT(events_after[4], events_after[3]);
}

TEST(ToolCalls, ChatStreamFlushesWhatIsNotACallAsContent) {
  ChatFormat format;
  format.tool_parser = ToolCallParser::kHermes;
  auto stream = chat_stream_formatter(format);
  std::vector<std::string> events;
  const std::vector<std::string> pieces = {"a <tool", "_call>no", " json</tool_call> b"};
  for (size_t i = 0; i < pieces.size(); ++i) {
    TaggedOutput t;
    t.output.text = pieces[i];
    if (i + 1 == pieces.size()) t.output.finish_reason = FinishReason::kStop;
    stream->on_output(t, events);
  }
  std::string content;
  for (const json& e : parsed(events)) {
    const json& delta = e["choices"][0]["delta"];
    EXPECT_FALSE(delta.contains("tool_calls"));
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (!e["choices"][0]["finish_reason"].is_null()) {
      EXPECT_EQ(e["choices"][0]["finish_reason"], "stop");
    }
  }
  EXPECT_EQ(content, "a <tool_call>no json</tool_call> b");
}

TEST(ToolCalls, WholeChatResponseCarriesTheCalls) {
  ChatFormat format;
  format.tool_parser = ToolCallParser::kLlama3Json;
  GenerationResult result;
  result.choices.resize(2);
  result.choices[0].text = "{\"name\": \"f\", \"parameters\": {\"y\": [1, 2]}}";
  result.choices[0].finish_reason = FinishReason::kStop;
  result.choices[1].text = "No call here.";
  result.choices[1].finish_reason = FinishReason::kStop;
  const json body = chat_completion_response(format, result);
  const json& called = body["choices"][0];
  EXPECT_TRUE(called["message"]["content"].is_null());
  EXPECT_EQ(called["message"]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_FALSE(called["message"]["tool_calls"][0].contains("index"));
  EXPECT_EQ(called["finish_reason"], "tool_calls");
  const json& plain = body["choices"][1];
  EXPECT_EQ(plain["message"]["content"], "No call here.");
  EXPECT_TRUE(plain["message"]["tool_calls"].empty());
  EXPECT_EQ(plain["finish_reason"], "stop");
}

TEST(ToolCalls, JsonListIsTheWholeOutput) {
  ParsedOutput out = parse_tool_calls(
      ToolCallParser::kJsonList,
      R"([{"name": "f", "parameters": {"x": 1}}, {"name": "g", "parameters": {}}])");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "f");
  EXPECT_EQ(json::parse(out.calls[0].arguments), json::parse(R"({"x": 1})"));
  EXPECT_EQ(out.calls[1].name, "g");
  EXPECT_TRUE(out.content.empty());
  // Cut short (max_tokens) or not calls: all content.
  for (const char* text : {R"([{"name": "f", "param)", "[]", "[1]", "{}"}) {
    out = parse_tool_calls(ToolCallParser::kJsonList, text);
    EXPECT_TRUE(out.calls.empty()) << text;
    EXPECT_EQ(out.content, text);
  }
}

}  // namespace
}  // namespace inflight::frontend

namespace inflight::frontend {
namespace {

// The parser each real template's instructions call for.
TEST(ToolCalls, ParserFollowsTheChatTemplate) {
  const std::pair<const char*, std::optional<ToolCallParser>> cases[] = {
      {"Qwen-Qwen2.5-7B-Instruct", ToolCallParser::kHermes},
      {"Qwen-Qwen3-0.6B", ToolCallParser::kHermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", ToolCallParser::kHermes},
      {"meta-llama-Llama-3.1-8B-Instruct", ToolCallParser::kLlama3Json},
      {"meta-llama-Llama-3.3-70B-Instruct", ToolCallParser::kLlama3Json},
      {"ibm-granite-granite-4.0", ToolCallParser::kHermes},
      {"meta-llama-Llama-3.2-3B-Instruct", ToolCallParser::kLlama3Json},
      {"Qwen3-Coder", ToolCallParser::kQwen3Coder},  // XML inside <tool_call>: not hermes
      {"StepFun3.5-Flash", ToolCallParser::kQwen3Coder},
      {"Mistral-Small-3.2-24B-Instruct-2506", ToolCallParser::kMistral},
      {"mistralai-Mistral-Nemo-Instruct-2407", ToolCallParser::kMistral},
      {"mistralai-Ministral-3-14B-Reasoning-2512", ToolCallParser::kMistral},
      {"LFM2.5-8B-A1B", ToolCallParser::kPythonic},
      {"GLM-4.6", ToolCallParser::kGlm45},
      {"GLM-4.7-Flash", ToolCallParser::kGlm45},
      {"poolside-Laguna-XS.2", ToolCallParser::kGlm45},
      {"ByteDance-Seed-OSS", ToolCallParser::kSeedOss},
      {"moonshotai-Kimi-K2", ToolCallParser::kKimiK2},
      {"Kimi-K2-Thinking", ToolCallParser::kKimiK2},
      {"deepseek-ai-DeepSeek-V3.1", ToolCallParser::kDeepSeekV31},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", ToolCallParser::kDeepSeekV3},
      {"llama-cpp-deepseek-r1", ToolCallParser::kDeepSeekV3},
      {"MiniMax-M2", std::nullopt},
      {"meetkai-functionary-medium-v3.1", std::nullopt},
  };
  for (const auto& [name, expected] : cases) {
    INFLIGHT_REQUIRE_DATA(path, std::string("chat-templates/") + name + ".jinja");
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(tool_call_parser_for_template(text), expected) << name;
  }
  EXPECT_EQ(tool_call_parser_for_template("{{ messages }}"), std::nullopt);
}

}  // namespace
}  // namespace inflight::frontend
