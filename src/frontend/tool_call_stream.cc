#include "frontend/tool_call_stream.h"

#include <nlohmann/json.hpp>

namespace inflight::frontend {

ToolCallStream::ToolCallStream(ToolCallParser parser, const nlohmann::ordered_json& tools)
    : parser_(parser), tools_(&tools) {}

ToolCallDelta ToolCallStream::add(std::string_view text, bool at_end) {
  text_ += text;
  ParsedOutput parsed = parse_tool_calls(parser_, text_, *tools_, at_end);
  ToolCallDelta delta;
  // Both only grow (parse_tool_calls); a held call that turned out malformed went out as a call
  // already, and its text, now content, is sent after what was sent.
  if (parsed.content.size() > content_sent_) {
    delta.content = parsed.content.substr(content_sent_);
    content_sent_ = parsed.content.size();
  }
  for (size_t i = 0; i < parsed.calls.size(); ++i) {
    const ToolCall& call = parsed.calls[i];
    if (i == args_sent_.size()) {
      delta.calls.push_back({i, true, call.name, {}});
      args_sent_.push_back(0);
    }
    if (call.arguments.size() > args_sent_[i]) {
      delta.calls.push_back({i, false, {}, call.arguments.substr(args_sent_[i])});
      args_sent_[i] = call.arguments.size();
    }
  }
  return delta;
}

}  // namespace inflight::frontend
