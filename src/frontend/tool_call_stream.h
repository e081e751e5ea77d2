// Tool calls of one streamed chat choice, sent as OpenAI streams them: the content as it comes,
// then per call a first delta (index, name, empty arguments) and fragments of its arguments as
// tokens arrive. Text that may start a call is held back until the parser decides; if it is no
// call, it goes out as content.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "frontend/tool_calls.h"

namespace inflight::frontend {

// What one output of the choice adds.
struct ToolCallDelta {
  struct Call {
    size_t index = 0;    // the call's place in the choice's tool_calls
    bool first = false;  // the call's first delta: carries `name` (arguments then empty)
    std::string name;
    std::string arguments;  // a fragment to append (empty on a first delta)
  };
  std::string content;      // text to send as content
  std::vector<Call> calls;  // in order
};

class ToolCallStream {
 public:
  // `tools`: the request's tools, which outlive the stream.
  ToolCallStream(ToolCallParser parser, const nlohmann::ordered_json& tools);
  ToolCallStream(ToolCallParser parser, nlohmann::ordered_json&& tools) = delete;  // a temporary

  // `text`: what this output adds to the choice's text; at_end: its last output.
  ToolCallDelta add(std::string_view text, bool at_end);

  size_t num_calls() const { return args_sent_.size(); }

 private:
  ToolCallParser parser_;
  const nlohmann::ordered_json* tools_;
  // NOTE: every output parses the whole text again (parse_tool_calls is not incremental); the
  // parsers are linear, so a choice costs O(output length^2 / token length) character steps.
  std::string text_;
  size_t content_sent_ = 0;        // bytes of the parse's content sent
  std::vector<size_t> args_sent_;  // per call begun: bytes of its arguments sent
};

}  // namespace inflight::frontend
