#include "frontend/tool_calls.h"

#include <array>
#include <utility>

#include <nlohmann/json.hpp>

#include "frontend/tool_call_formats.h"

namespace inflight::frontend {

namespace {

using json = nlohmann::ordered_json;

constexpr std::array<std::pair<std::string_view, ToolCallParser>, 11> kNamed = {{
    {"hermes", ToolCallParser::kHermes},
    {"llama3_json", ToolCallParser::kLlama3Json},
    {"mistral", ToolCallParser::kMistral},
    {"qwen3_coder", ToolCallParser::kQwen3Coder},
    {"seed_oss", ToolCallParser::kSeedOss},
    {"glm45", ToolCallParser::kGlm45},
    {"glm47", ToolCallParser::kGlm45},
    {"kimi_k2", ToolCallParser::kKimiK2},
    {"deepseek_v3", ToolCallParser::kDeepSeekV3},
    {"deepseek_v31", ToolCallParser::kDeepSeekV31},
    {"pythonic", ToolCallParser::kPythonic},
}};

}  // namespace

const std::vector<std::string>& tool_call_parser_name_list() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& [name, parser] : kNamed) out.emplace_back(name);
    return out;
  }();
  return names;
}

std::string tool_call_parser_names() {
  std::string out;
  for (const auto& name : tool_call_parser_name_list()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

std::optional<ToolCallParser> tool_call_parser_named(std::string_view name) {
  for (const auto& [n, parser] : kNamed) {
    if (n == name) return parser;
  }
  return std::nullopt;
}

std::optional<ToolCallParser> tool_call_parser_for_template(std::string_view chat_template) {
  const auto has = [&](std::string_view s) {
    return chat_template.find(s) != std::string_view::npos;
  };
  // Qwen3-Coder, Step 3.5: <tool_call>\n<function=name>\n<parameter=p>...; ByteDance Seed's
  // the same in <seed:tool_call> (functionary's bare <function=name>{json} is another format).
  if (has("<function=") && has("<parameter=")) {
    if (has("<seed:tool_call>")) return ToolCallParser::kSeedOss;
    if (has("<tool_call>")) return ToolCallParser::kQwen3Coder;
  }
  // GLM-4.5 and later, Laguna: <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>.
  if (has("<tool_call>") && has("<arg_key>") && has("<arg_value>")) return ToolCallParser::kGlm45;
  // Kimi K2: <|tool_calls_section_begin|> ... <|tool_call_argument_begin|>{...}.
  if (has("<|tool_calls_section_begin|>")) return ToolCallParser::kKimiK2;
  // DeepSeek: <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...} (V3.1), or function<｜tool▁sep｜>NAME
  // and a ```json fence (V3, R1).
  if (has("<｜tool▁call▁begin｜>") && has("<｜tool▁sep｜>")) {
    return has("```json") ? ToolCallParser::kDeepSeekV3 : ToolCallParser::kDeepSeekV31;
  }
  // Hermes: <tool_call> blocks holding {"name": <function-name>, "arguments": ...} (GLM writes
  // other keys inside <tool_call>).
  if (has("<tool_call>") && has("<function-name>") && has("arguments")) {
    return ToolCallParser::kHermes;
  }
  // Mistral: assistant tool calls rendered after [TOOL_CALLS], as a list or as name[ARGS]{...}.
  if (has("[TOOL_CALLS]")) return ToolCallParser::kMistral;
  // Pythonic: vLLM's and Llama 4's instructions "[func_name1(params_name1=params_value1, ...)]",
  // LFM2's calls rendered as <|tool_call_start|>[name(arg=value)]<|tool_call_end|>.
  if (has("[func_name1(") || (has("<|tool_call_start|>[") && has("\"(\""))) {
    return ToolCallParser::kPythonic;
  }
  // Llama 3.x: "Respond in the format {"name": function name, "parameters": dictionary of
  // argument name and its value}".
  if (has("dictionary of argument name")) return ToolCallParser::kLlama3Json;
  return std::nullopt;
}

namespace {

ParsedOutput parse_format(ToolCallParser parser, std::string_view text, const json& tools,
                          bool at_end) {
  using namespace tool_call_formats;
  switch (parser) {
    case ToolCallParser::kHermes:
      return parse_hermes(text, at_end);
    case ToolCallParser::kLlama3Json:
      return parse_llama3_json(text, at_end);
    case ToolCallParser::kMistral:
      return parse_mistral(text, at_end);
    case ToolCallParser::kQwen3Coder:
      return parse_qwen3_coder(text, tools, at_end);
    case ToolCallParser::kSeedOss:
      return parse_seed_oss(text, tools, at_end);
    case ToolCallParser::kGlm45:
      return parse_glm45(text, tools, at_end);
    case ToolCallParser::kKimiK2:
      return parse_kimi_k2(text, at_end);
    case ToolCallParser::kDeepSeekV3:
      return parse_deepseek_v3(text, at_end);
    case ToolCallParser::kDeepSeekV31:
      return parse_deepseek_v31(text, at_end);
    case ToolCallParser::kPythonic:
      return parse_pythonic(text, at_end);
    case ToolCallParser::kJsonList:
      return parse_json_list(text, at_end);
  }
  return tool_call_formats::all_content(text);
}

}  // namespace

ParsedOutput parse_tool_calls(ToolCallParser parser, std::string_view text, const json& tools,
                              bool at_end) {
  using namespace tool_call_formats;
  ParsedOutput out = parse_format(parser, text, tools, at_end);
  // An output that calls nothing is all content: no text of it is dropped.
  if (at_end && out.calls.empty() && out.content.size() != text.size()) return all_content(text);
  return out;
}

ParsedOutput parse_tool_calls(ToolCallParser parser, std::string_view text) {
  return parse_tool_calls(parser, text, json(), /*at_end=*/true);
}

std::string message_content(const ParsedOutput& parsed) {
  if (parsed.calls.empty()) return parsed.content;
  return std::string(tool_call_formats::trim(parsed.content));
}

}  // namespace inflight::frontend
