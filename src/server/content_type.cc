#include "server/content_type.h"

#include <optional>
#include <string>
#include <string_view>

#include "server/http.h"

namespace inflight::server {

namespace {

// The media type of the one Content-Type header, lower case, without parameters; nullopt when
// there is none or more than one.
std::optional<std::string> media_type(const HttpRequest& req) {
  if (req.header_count("content-type") != 1) return std::nullopt;
  std::string type;
  for (char c : *req.header("content-type")) {
    if (c == ';') break;
    if (c == ' ' || c == '\t') continue;
    type += c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return type;
}

}  // namespace

bool has_json_content_type(const HttpRequest& req) {
  const size_t count = req.header_count("content-type");
  if (count == 0) return true;
  const std::optional<std::string> type = media_type(req);
  if (!type) return false;
  constexpr std::string_view kPrefix = "application/";
  if (!type->starts_with(kPrefix)) return false;
  const std::string_view subtype = std::string_view(*type).substr(kPrefix.size());
  return subtype == "json" || (subtype.size() > 5 && subtype.ends_with("+json"));
}

bool has_binary_content_type(const HttpRequest& req) {
  return media_type(req) == "application/octet-stream";
}

}  // namespace inflight::server
