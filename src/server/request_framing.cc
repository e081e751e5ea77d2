#include "server/request_framing.h"

#include <string_view>
#include <vector>

namespace inflight::server {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
    if (x != b[i]) return false;
  }
  return true;
}

// The comma-separated elements of every header named `name`, trimmed (empty ones kept: an
// empty element is as suspicious as any other).
std::vector<std::string_view> elements(const HttpHeaders& headers, std::string_view name) {
  std::vector<std::string_view> out;
  for (const auto& [key, value] : headers) {
    if (key != name) continue;
    std::string_view rest = value;
    for (;;) {
      size_t comma = rest.find(',');
      out.push_back(trim(rest.substr(0, comma)));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return out;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> framing_error(unsigned version, const HttpHeaders& headers) {
  size_t hosts = 0;
  bool has_te = false, has_cl = false;
  for (const auto& [key, value] : headers) {
    hosts += key == "host" ? 1 : 0;
    has_te = has_te || key == "transfer-encoding";
    has_cl = has_cl || key == "content-length";
  }
  if (hosts > 1) return "more than one Host header";
  if (hosts == 0 && version >= 11) return "HTTP/1.1 request without a Host header";
  if (has_te) {
    if (version < 11) return "Transfer-Encoding in an HTTP/1.0 request";
    if (has_cl) return "both Transfer-Encoding and Content-Length";
    // Only a single "chunked" coding is supported: no other coding is decoded, and anything
    // else leaves the body's length unknown.
    const auto codings = elements(headers, "transfer-encoding");
    if (codings.size() != 1 || !iequals(codings.front(), "chunked")) {
      return "unsupported Transfer-Encoding (only 'chunked' is accepted)";
    }
  }
  if (has_cl) {
    const auto lengths = elements(headers, "content-length");
    for (std::string_view length : lengths) {
      if (!all_digits(length)) return "invalid Content-Length";
      if (length != lengths.front()) return "conflicting Content-Length values";
    }
  }
  return std::nullopt;
}

}  // namespace inflight::server
