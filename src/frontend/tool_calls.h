// Tool calls in a chat model's output, as its chat template told the model to write them
// (`inflight serve --tool-call-parser NAME`, vLLM's names):
//
//   hermes       <tool_call>{"name": "f", "arguments": {...}}</tool_call>, one block per call,
//                text around the blocks is content (Qwen2.5/Qwen3, Hermes, SmolLM3 templates)
//   llama3_json  the whole output is the call: {"name": "f", "parameters": {...}} (or
//                "arguments"), several separated by ';', optionally after <|python_tag|>
//                (Llama 3.1/3.2 templates)
//   json_list    the whole output is a JSON list of {"name": "f", "parameters": {...}}: what
//                tool_choice "required" or a named function makes the model write (structured
//                output, structured_output_fields.h); not a --tool-call-parser name
//
// Parsing never fails a request: text that does not hold a well-formed call stays content.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inflight::frontend {

enum class ToolCallParser { kHermes, kLlama3Json, kJsonList };

// The parser of a --tool-call-parser name, or nullopt for an unknown one.
std::optional<ToolCallParser> tool_call_parser_named(std::string_view name);

// The parser a chat template's own instructions call for, when no --tool-call-parser is given:
// hermes for one that asks for <tool_call>{"name": <function-name>, "arguments": ...}
// blocks (Qwen2.5/Qwen3, Hermes, Granite), llama3_json for Llama 3.x's {"name": ...,
// "parameters": ...}; nullopt for any other or no format (then outputs are content).
std::optional<ToolCallParser> tool_call_parser_for_template(std::string_view chat_template);

struct ToolCall {
  std::string name;       // the function
  std::string arguments;  // its arguments object as JSON text (OpenAI sends a string)
};

struct ParsedOutput {
  std::string content;  // the text outside the calls (everything when there are none)
  std::vector<ToolCall> calls;
};

// Splits a whole output into content and calls.
ParsedOutput parse_tool_calls(ToolCallParser parser, std::string_view text);

// Streaming: where in the text generated so far a tool call starts or may start (text from
// there on must be held back until the end, then parsed whole), or npos when all of it is
// content. A marker split across tokens ("<tool" + "_call>") is held from its first character.
size_t tool_call_start(ToolCallParser parser, std::string_view text);

}  // namespace inflight::frontend
