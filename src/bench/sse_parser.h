// SseParser: incremental parser of a text/event-stream body (the WHATWG "server-sent events"
// format), fed with bytes as they arrive, in pieces of any size.
//
//   data: {"choices": ...}\n      one event per blank-line-terminated block; several data
//   \n                            lines join with '\n'; ':' starts a comment (keep-alive pings);
//   event: error\n                lines end with \n, \r\n or \r, also when split across feeds.
//
// An event is dispatched when its terminating blank line arrives; blocks without a data line
// (comments only) dispatch nothing. finish() dispatches a last block that the stream ended
// without terminating (lenient: some servers omit the final blank line).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace inflight::bench {

struct SseEvent {
  std::string event;  // the `event:` field; empty means "message"
  std::string data;
};

class SseParser {
 public:
  using Callback = std::function<void(const SseEvent&)>;

  explicit SseParser(Callback on_event) : on_event_(std::move(on_event)) {}

  void feed(std::string_view bytes);
  void finish();

  // Events dispatched so far.
  size_t num_events() const { return num_events_; }

 private:
  void on_line(std::string_view line);
  void dispatch();

  Callback on_event_;
  std::string line_;       // the current, unterminated line
  bool skip_lf_ = false;   // the previous feed ended in '\r': a leading '\n' belongs to it
  bool has_data_ = false;  // the current block has at least one data line
  SseEvent pending_;
  size_t num_events_ = 0;
};

}  // namespace inflight::bench
