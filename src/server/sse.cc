#include "server/sse.h"

namespace inflight::server {

void append_sse_event(std::string& out, std::string_view data, std::string_view event) {
  if (!event.empty()) {
    out += "event: ";
    out += event;
    out += '\n';
  }
  // Each line of the payload is its own field; "\r\n", "\r" and "\n" all end a line.
  size_t start = 0;
  while (true) {
    size_t end = data.find_first_of("\r\n", start);
    out += "data: ";
    out += data.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    out += '\n';
    if (end == std::string_view::npos) break;
    start = end + 1;
    if (data[end] == '\r' && start < data.size() && data[start] == '\n') ++start;
  }
  out += '\n';
}

}  // namespace inflight::server
