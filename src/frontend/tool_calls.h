// Tool calls in a chat model's output, as its chat template told the model to write them
// (`inflight serve --tool-call-parser NAME`, vLLM's names):
//
//   hermes       <tool_call>{"name": "f", "arguments": {...}}</tool_call>, one block per call,
//                text around the blocks is content (Qwen2.5/Qwen3, Hermes, Granite templates)
//   llama3_json  the whole output is the call: {"name": "f", "parameters": {...}} (or
//                "arguments"), several separated by ';', optionally after <|python_tag|>
//                (Llama 3.1/3.2/3.3 templates)
//   mistral      [TOOL_CALLS] followed by a JSON list of {"name", "arguments"} (Mistral 7B v0.3,
//                Nemo) or by name[ARGS]{...}, one [TOOL_CALLS] per call (Mistral Small 3.2,
//                Ministral 3, Magistral; a [CALL_ID]id before [ARGS] is skipped); text before
//                the first marker is content
//   qwen3_coder  <tool_call><function=f><parameter=p>value</parameter>...</function></tool_call>,
//                each value converted by the type of `p` in the tool's JSON schema (Qwen3-Coder,
//                Step 3.5)
//   seed_oss     the same inside <seed:tool_call>...</seed:tool_call> (ByteDance Seed-OSS)
//   glm45        <tool_call>f<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call>, with
//                or without newlines between the parts; a value is text for a "string"
//                parameter, else JSON when it reads as JSON (GLM-4.5/4.6/4.7, Laguna; also
//                named glm47)
//   kimi_k2      <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0
//                <|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|>
//                (Kimi K2)
//   deepseek_v31 <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
//                ...<｜tool▁calls▁end｜> (DeepSeek V3.1)
//   deepseek_v3  the same markers around function<｜tool▁sep｜>f\n```json\n{...}\n``` (DeepSeek
//                V3, R1 and its distills)
//   pythonic     a Python list of calls [f(a=1), g(b="x")], the whole output, optionally inside
//                <|python_start|>...<|python_end|> (Llama 3.2/4 pythonic templates) or after
//                text inside <|tool_call_start|>...<|tool_call_end|> (LFM2)
//   json_list    the whole output is a JSON list of {"name": "f", "parameters": {...}}: what
//                tool_choice "required" or a named function makes the model write (structured
//                output, structured_output_fields.h); not a --tool-call-parser name
//
// Parsing never fails a request: text that does not hold a well-formed call stays content.
// Arguments are the JSON text of the call's arguments object (OpenAI sends a string): as the
// model wrote it for the JSON formats, built from the values for the XML formats and pythonic.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace inflight::frontend {

enum class ToolCallParser {
  kHermes,
  kLlama3Json,
  kMistral,
  kQwen3Coder,
  kSeedOss,
  kGlm45,
  kKimiK2,
  kDeepSeekV3,
  kDeepSeekV31,
  kPythonic,
  kJsonList
};

// The --tool-call-parser names: hermes, llama3_json, ...
const std::vector<std::string>& tool_call_parser_name_list();
// The same for messages: "hermes, llama3_json, ...".
std::string tool_call_parser_names();

// The parser of a --tool-call-parser name, or nullopt for an unknown one.
std::optional<ToolCallParser> tool_call_parser_named(std::string_view name);

// The parser a chat template's own rendering calls for, when no --tool-call-parser is given:
// qwen3_coder for <tool_call><function=...> XML, seed_oss for the same in <seed:tool_call>,
// glm45 for <arg_key>/<arg_value> pairs, kimi_k2, deepseek_v3 and deepseek_v31 for their
// special-token sections, hermes for <tool_call>{"name": <function-name>,
// "arguments": ...} blocks, mistral for [TOOL_CALLS], pythonic for [func_name1(...)] lists,
// llama3_json for Llama 3.x's {"name": ..., "parameters": ...}; nullopt for any other or no
// format.
std::optional<ToolCallParser> tool_call_parser_for_template(std::string_view chat_template);

struct ToolCall {
  std::string name;       // the function
  std::string arguments;  // its arguments object as JSON text
};

struct ParsedOutput {
  std::string content;  // the text outside the calls (everything when there are none)
  std::vector<ToolCall> calls;
};

// Splits an output into content and calls. `tools` is the request's tools array (null: none;
// the XML formats read parameter types from it).
//
// at_end: `text` is the whole output. Otherwise it is the output so far, and the result is
// what is decided: `content` holds the text outside calls that can no longer become part of one
// (a possible call's start is held back), `calls` every call begun whose name is complete, with
// the arguments text known so far. Both only grow as the text grows: the final result's content
// and each call's arguments extend the earlier ones (see ToolCallStream), unless a held call
// turns out malformed, when its text becomes content.
ParsedOutput parse_tool_calls(ToolCallParser parser, std::string_view text,
                              const nlohmann::ordered_json& tools, bool at_end = true);
// The same without tools (no parameter is typed).
ParsedOutput parse_tool_calls(ToolCallParser parser, std::string_view text);

// The content of a whole message (not streamed): without surrounding whitespace when it comes
// with calls (the newlines around <tool_call> blocks), as written otherwise.
std::string message_content(const ParsedOutput& parsed);

}  // namespace inflight::frontend
