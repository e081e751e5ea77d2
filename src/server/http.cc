#include "server/http.h"

namespace inflight::server {

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return &value;
  }
  return nullptr;
}

}  // namespace inflight::server
