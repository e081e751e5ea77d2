// libFuzzer target: the front end's OpenAI request parsers and the tool-call parsers on arbitrary
// bytes.
//
// The bytes are a request body: parsed as JSON, then as an OpenAI completion and an OpenAI chat
// completion. Every failure must be an ApiError (a 400 with the field named),
// never a crash or another exception; whatever parses must also pass the engine's own checks or
// fail them with a Status. The same bytes, as model output, go through every tool-call parser:
// their content plus calls may not invent text, whole or streamed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "frontend/api_error.h"
#include "frontend/json_fields.h"
#include "frontend/openai_protocol.h"
#include "frontend/tool_call_stream.h"
#include "frontend/tool_calls.h"

namespace {

using namespace inflight;
using namespace inflight::frontend;

template <typename Parse>
void expect_api_error_or_valid(Parse parse) {
  try {
    const SamplingParams sampling = parse();
    (void)sampling.validate();  // a Status either way; must not throw
  } catch (const ApiError&) {
    // a clean 400
  }
}

void tool_calls(std::string_view text) {
  const nlohmann::ordered_json no_tools;  // outlives each stream, as a request's tools do
  for (const ToolCallParser p :
       {ToolCallParser::kHermes, ToolCallParser::kLlama3Json, ToolCallParser::kMistral,
        ToolCallParser::kQwen3Coder, ToolCallParser::kSeedOss, ToolCallParser::kGlm45,
        ToolCallParser::kKimiK2, ToolCallParser::kDeepSeekV3, ToolCallParser::kDeepSeekV31,
        ToolCallParser::kPythonic, ToolCallParser::kJsonList}) {
    const ParsedOutput out = parse_tool_calls(p, text);
    if (out.calls.empty() && out.content != text) std::abort();
    if (out.content.size() > text.size()) std::abort();
    // Streamed in two pieces, the content sent never exceeds the text.
    ToolCallStream stream(p, no_tools);
    std::string content = stream.add(text.substr(0, text.size() / 2), false).content;
    content += stream.add(text.substr(text.size() / 2), true).content;
    if (content.size() > text.size()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  tool_calls(body);
  nlohmann::ordered_json json;
  try {
    json = parse_json_object(body);
  } catch (const ApiError&) {
    return 0;
  }
  const ProtocolLimits limits{8, 20, 16, 50000};
  expect_api_error_or_valid(
      [&] { return parse_completion_request(json, limits).options.sampling; });
  expect_api_error_or_valid(
      [&] { return parse_chat_completion_request(json, limits).options.sampling; });
  return 0;
}
