#include "server/cors.h"

#include <algorithm>
#include <cctype>

namespace inflight::server {

namespace {

constexpr int kMaxAgeSeconds = 600;

// The header names a preflight asks for, lower-cased and kept only when they are tokens (the
// value is echoed into a response header).
std::string requested_headers(const std::string* value) {
  std::string out;
  if (value == nullptr) return out;
  std::string name;
  auto flush = [&] {
    if (!name.empty() && name != "authorization" && name != "content-type") {
      out += ", " + name;
    }
    name.clear();
  };
  for (char c : *value) {
    if (c == ',') {
      flush();
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (c != ' ' && c != '\t') {
      return {};  // not a list of header names: ask for nothing extra
    }
  }
  flush();
  return out;
}

}  // namespace

CorsPolicy::CorsPolicy(std::vector<std::string> allowed_origins)
    : origins_(std::move(allowed_origins)) {
  any_ = std::find(origins_.begin(), origins_.end(), "*") != origins_.end();
}

std::string CorsPolicy::allow_origin(const std::string* origin) const {
  if (origin == nullptr || origins_.empty()) return {};
  if (any_) return "*";
  return std::find(origins_.begin(), origins_.end(), *origin) != origins_.end() ? *origin
                                                                                : std::string();
}

HttpHeaders CorsPolicy::response_headers(const HttpRequest& req) const {
  HttpHeaders out;
  if (!enabled()) return out;
  std::string allowed = allow_origin(req.header("origin"));
  if (!allowed.empty()) out.emplace_back("Access-Control-Allow-Origin", std::move(allowed));
  out.emplace_back("Vary", "Origin");  // caches must not serve one origin's answer to another
  return out;
}

std::optional<HttpResponse> CorsPolicy::preflight(const HttpRequest& req) const {
  if (req.method != "OPTIONS" || req.header("access-control-request-method") == nullptr) {
    return std::nullopt;
  }
  std::string allowed = allow_origin(req.header("origin"));
  if (allowed.empty()) return std::nullopt;
  HttpResponse res;
  res.status = 204;
  res.content_type.clear();
  res.headers = {
      {"Access-Control-Allow-Origin", std::move(allowed)},
      {"Vary", "Origin"},
      {"Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS"},
      {"Access-Control-Allow-Headers",
       "authorization, content-type" +
           requested_headers(req.header("access-control-request-headers"))},
      {"Access-Control-Max-Age", std::to_string(kMaxAgeSeconds)},
  };
  return res;
}

}  // namespace inflight::server
