#include "bench/sse_parser.h"

namespace inflight::bench {

void SseParser::feed(std::string_view bytes) {
  size_t i = 0;
  if (skip_lf_ && !bytes.empty()) {
    if (bytes[0] == '\n') i = 1;
    skip_lf_ = false;
  }
  while (i < bytes.size()) {
    const size_t end = bytes.find_first_of("\r\n", i);
    if (end == std::string_view::npos) {
      line_.append(bytes.substr(i));
      return;
    }
    line_.append(bytes.substr(i, end - i));
    on_line(line_);
    line_.clear();
    i = end + 1;
    if (bytes[end] == '\r') {
      if (i < bytes.size()) {
        if (bytes[i] == '\n') ++i;
      } else {
        skip_lf_ = true;
      }
    }
  }
}

void SseParser::finish() {
  if (!line_.empty()) {
    on_line(line_);
    line_.clear();
  }
  dispatch();
}

void SseParser::on_line(std::string_view line) {
  if (line.empty()) {
    dispatch();
    return;
  }
  if (line[0] == ':') return;  // comment
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) pending_.data.push_back('\n');
    pending_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    pending_.event.assign(value);
  }
  // `id` and `retry` do not matter to a benchmark; unknown fields are ignored per the format.
}

void SseParser::dispatch() {
  if (has_data_) {
    ++num_events_;
    on_event_(pending_);
  }
  pending_ = SseEvent{};
  has_data_ = false;
}

}  // namespace inflight::bench
