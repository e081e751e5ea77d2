// Server-Sent Events framing (the text/event-stream format OpenAI and TGI stream in).
//
//   data: {"id":"cmpl-1",...}\n\n     one event per JSON chunk
//   data: [DONE]\n\n                  OpenAI's end marker (TGI sends none)
//
// A payload holding newlines becomes one `data:` line per line, which a client joins with
// "\n" again; JSON from nlohmann's dump() has none, so this is one line in practice.
#pragma once

#include <string>
#include <string_view>

namespace inflight::server {

inline constexpr std::string_view kSseContentType = "text/event-stream";
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// Appends one event carrying `data` to `out`; `event` names it ("" = the default "message").
void append_sse_event(std::string& out, std::string_view data, std::string_view event = {});

}  // namespace inflight::server
