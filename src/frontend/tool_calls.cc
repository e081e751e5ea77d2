#include "frontend/tool_calls.h"

#include <nlohmann/json.hpp>

namespace inflight::frontend {

namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// {"name": "...", "arguments" | "parameters": {...} or a JSON string}, else nullopt.
std::optional<ToolCall> call_from(std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall call;
  call.name = j["name"].get<std::string>();
  const char* key = j.contains("arguments") ? "arguments" : "parameters";
  if (!j.contains(key)) {
    call.arguments = "{}";
  } else if (j[key].is_object()) {
    call.arguments = j[key].dump();
  } else if (j[key].is_string()) {  // already encoded, as OpenAI sends it
    call.arguments = j[key].get<std::string>();
  } else {
    return std::nullopt;
  }
  return call;
}

ParsedOutput parse_hermes(std::string_view text) {
  ParsedOutput out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t open = text.find(kHermesOpen, pos);
    if (open == std::string_view::npos) break;
    const size_t body = open + kHermesOpen.size();
    size_t close = text.find(kHermesClose, body);
    // A model stopped by EOS or a stop string may leave the last block unclosed.
    const size_t end = close == std::string_view::npos ? text.size() : close + kHermesClose.size();
    if (close == std::string_view::npos) close = text.size();
    std::optional<ToolCall> call = call_from(trim(text.substr(body, close - body)));
    out.content += text.substr(pos, (call ? open : end) - pos);
    if (call) out.calls.push_back(std::move(*call));
    pos = end;
  }
  out.content += text.substr(std::min(pos, text.size()));
  if (!out.calls.empty()) out.content = std::string(trim(out.content));
  return out;
}

// The end of the JSON object that starts at text[0] == '{' (strings and escapes honoured), or
// npos when it does not close.
size_t object_end(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}' && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

ParsedOutput parse_llama3_json(std::string_view text) {
  std::string_view rest = trim(text);
  if (rest.starts_with(kPythonTag)) rest = trim(rest.substr(kPythonTag.size()));
  ParsedOutput out;
  while (!rest.empty()) {
    const size_t end = rest.front() == '{' ? object_end(rest) : std::string_view::npos;
    std::optional<ToolCall> call;
    if (end != std::string_view::npos) call = call_from(rest.substr(0, end));
    if (!call) return ParsedOutput{std::string(text), {}};  // not (only) calls: all content
    out.calls.push_back(std::move(*call));
    rest = trim(rest.substr(end));
    if (rest.starts_with(';')) rest = trim(rest.substr(1));
  }
  if (out.calls.empty()) out.content = std::string(text);
  return out;
}

ParsedOutput parse_json_list(std::string_view text) {
  const json list = json::parse(text, nullptr, /*allow_exceptions=*/false);
  ParsedOutput out;
  if (list.is_array()) {
    for (const json& item : list) {
      std::optional<ToolCall> call = item.is_object() ? call_from(item.dump()) : std::nullopt;
      if (!call) return ParsedOutput{std::string(text), {}};
      out.calls.push_back(std::move(*call));
    }
  }
  if (out.calls.empty()) out.content = std::string(text);
  return out;
}

}  // namespace

std::optional<ToolCallParser> tool_call_parser_named(std::string_view name) {
  if (name == "hermes") return ToolCallParser::kHermes;
  if (name == "llama3_json") return ToolCallParser::kLlama3Json;
  return std::nullopt;
}

std::optional<ToolCallParser> tool_call_parser_for_template(std::string_view chat_template) {
  const auto has = [&](std::string_view s) {
    return chat_template.find(s) != std::string_view::npos;
  };
  // Hermes: <tool_call> blocks holding {"name": <function-name>, "arguments": ...} (other
  // templates write other formats inside <tool_call>: Qwen3-Coder's XML, GLM's argument keys).
  if (has("<tool_call>") && has("<function-name>") && has("arguments")) {
    return ToolCallParser::kHermes;
  }
  // Llama 3.x: "Respond in the format {"name": function name, "parameters": dictionary of
  // argument name and its value}".
  if (has("dictionary of argument name")) return ToolCallParser::kLlama3Json;
  return std::nullopt;
}

ParsedOutput parse_tool_calls(ToolCallParser parser, std::string_view text) {
  switch (parser) {
    case ToolCallParser::kHermes:
      return parse_hermes(text);
    case ToolCallParser::kLlama3Json:
      return parse_llama3_json(text);
    case ToolCallParser::kJsonList:
      return parse_json_list(text);
  }
  return ParsedOutput{std::string(text), {}};
}

size_t tool_call_start(ToolCallParser parser, std::string_view text) {
  if (parser == ToolCallParser::kJsonList) return 0;  // the whole output is the calls
  if (parser == ToolCallParser::kLlama3Json) {
    // The decision falls on the first visible character: '{' or the python tag hold it all.
    const size_t b = text.find_first_not_of(" \t\r\n");
    if (b == std::string_view::npos) return 0;
    const std::string_view head = text.substr(b);
    const bool tag = head.size() < kPythonTag.size() ? kPythonTag.starts_with(head)
                                                     : head.starts_with(kPythonTag);
    return head.front() == '{' || tag ? 0 : std::string_view::npos;
  }
  if (const size_t open = text.find(kHermesOpen); open != std::string_view::npos) return open;
  for (size_t k = std::min(text.size(), kHermesOpen.size() - 1); k > 0; --k) {
    if (text.ends_with(kHermesOpen.substr(0, k))) return text.size() - k;
  }
  return std::string_view::npos;
}

}  // namespace inflight::frontend
