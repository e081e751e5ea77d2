#include "server/http.h"

namespace inflight::server {

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return &value;
  }
  return nullptr;
}

size_t HttpRequest::header_count(std::string_view name) const {
  size_t n = 0;
  for (const auto& [key, value] : headers) n += key == name ? 1 : 0;
  return n;
}

}  // namespace inflight::server
