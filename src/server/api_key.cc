#include "server/api_key.h"

#include <strings.h>

#include <cstdint>

namespace inflight::server {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Every byte of the longer string is visited; a length mismatch is folded into the result.
  size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile uint8_t diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    uint8_t x = i < a.size() ? static_cast<uint8_t>(a[i]) : 0;
    uint8_t y = i < b.size() ? static_cast<uint8_t>(b[i]) : 0;
    diff = diff | static_cast<uint8_t>(x ^ y);
  }
  return diff == 0;
}

bool authorization_matches(const std::string* authorization, std::string_view key) {
  if (authorization == nullptr) return constant_time_equal("", key) && key.empty();
  std::string_view value = *authorization;
  constexpr std::string_view kScheme = "bearer ";
  if (value.size() < kScheme.size() ||
      strncasecmp(value.data(), kScheme.data(), kScheme.size()) != 0) {
    return false;
  }
  value.remove_prefix(kScheme.size());
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  return constant_time_equal(value, key);
}

}  // namespace inflight::server
