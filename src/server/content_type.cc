#include "server/content_type.h"

#include <string>
#include <string_view>

#include "server/http.h"

namespace inflight::server {

bool has_json_content_type(const HttpRequest& req) {
  const size_t count = req.header_count("content-type");
  if (count == 0) return true;
  if (count > 1) return false;
  std::string type;
  for (char c : *req.header("content-type")) {
    if (c == ';') break;
    if (c == ' ' || c == '\t') continue;
    type += c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  }
  constexpr std::string_view kPrefix = "application/";
  if (!type.starts_with(kPrefix)) return false;
  const std::string_view subtype = std::string_view(type).substr(kPrefix.size());
  return subtype == "json" || (subtype.size() > 5 && subtype.ends_with("+json"));
}

}  // namespace inflight::server
