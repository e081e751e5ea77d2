#include "server/router.h"

#include "frontend/error_mapping.h"
#include "server/api_key.h"
#include "server/content_type.h"
#include "server/http_responses.h"

namespace inflight::server {

Router::Router(std::string api_key) : api_key_(std::move(api_key)) {}

void Router::add(std::string method, std::string path, HttpHandler handler, bool protected_route) {
  routes_[std::move(path)].push_back({std::move(method), std::move(handler), protected_route});
}

void Router::add_prefix(std::string method, std::string prefix, HttpHandler handler,
                        bool protected_route, bool binary_body) {
  prefixes_[std::move(prefix)].push_back(
      {std::move(method), std::move(handler), protected_route, binary_body});
}

HttpResponse Router::handle(const HttpRequest& req) const {
  auto it = routes_.find(req.path);
  if (it == routes_.end()) {
    // The longest registered prefix: prefixes of one path sort shortest first.
    it = prefixes_.end();
    for (auto p = prefixes_.begin(); p != prefixes_.end(); ++p) {
      if (req.path.starts_with(p->first)) it = p;
    }
    if (it == prefixes_.end()) return error_response(404, "route " + req.path + " not found");
  }
  // HEAD is answered as GET; the transport drops the body.
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  const Route* route = nullptr;
  std::string allow;
  for (const auto& r : it->second) {
    if (r.method == method) route = &r;
    allow += (allow.empty() ? "" : ", ") + r.method;
    if (r.method == "GET") allow += ", HEAD";
  }
  if (route == nullptr) {
    HttpResponse res = error_response(405, "method " + req.method + " not allowed on " + req.path);
    res.headers.emplace_back("Allow", allow);
    return res;
  }
  // Two Authorization headers are refused outright: which one counts would otherwise depend
  // on the parser, and a proxy in front may check the other.
  if (route->protected_route && !api_key_.empty() &&
      (req.header_count("authorization") > 1 ||
       !authorization_matches(req.header("authorization"), api_key_))) {
    HttpResponse res = error_response(401, "invalid or missing API key");
    res.headers.emplace_back("WWW-Authenticate", "Bearer");
    return res;
  }
  if (route->method == "POST" && !has_json_content_type(req) &&
      !(route->binary_body && has_binary_content_type(req))) {
    return error_response(415, "unsupported Content-Type: send the body as application/json");
  }
  try {
    return route->handler(req);
  } catch (...) {
    return error_response(frontend::current_api_error(req.method + " " + req.path));
  }
}

std::vector<std::pair<std::string, std::string>> Router::routes() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [path, routes] : routes_) {
    for (const auto& r : routes) out.emplace_back(r.method, path);
  }
  return out;
}

}  // namespace inflight::server
