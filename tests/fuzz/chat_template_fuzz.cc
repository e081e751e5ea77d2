// libFuzzer target for the chat template engine: template source (and optionally a context)
// from untrusted bytes. Any failure must be an inflight::Error; crashes, hangs, sanitizer reports
// and other exceptions are bugs.
//
// Input: template source, optionally followed by "\n@@\n" and a JSON object used as the context
// (otherwise a fixed conversation with tools is used).
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/check.h"
#include "tokenizer/chat_template/chat_template.h"

namespace {

const nlohmann::ordered_json& default_context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Weather in Paris? \u00e9\u4e2d"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "22C"},
      {"role": "assistant", "content": "It is 22C."}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::string source = input;
  nlohmann::ordered_json context = default_context();
  const std::size_t split = input.find("\n@@\n");
  if (split != std::string::npos) {
    source = input.substr(0, split);
    auto parsed = nlohmann::ordered_json::parse(input.substr(split + 4), nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) return 0;
    context = std::move(parsed);
  }
  inflight::ChatTemplateRenderOptions options;
  options.fixed_now = "2024-07-26T12:00:00";
  try {
    const auto tmpl = inflight::ChatTemplate::parse(source);
    tmpl.render(context, options);
  } catch (const inflight::Error&) {
    // Malformed, unsupported or failing templates are expected.
  }
  return 0;
}
