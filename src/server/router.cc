#include "server/router.h"

#include "core/check.h"
#include "core/logging.h"
#include "server/api_key.h"
#include "server/http_responses.h"

namespace inflight::server {

Router::Router(std::string api_key) : api_key_(std::move(api_key)) {}

void Router::add(std::string method, std::string path, HttpHandler handler,
                 bool protected_route) {
  routes_[std::move(path)].push_back({std::move(method), std::move(handler), protected_route});
}

HttpResponse Router::handle(const HttpRequest& req) const {
  auto it = routes_.find(req.path);
  if (it == routes_.end()) {
    return error_response(404, "route " + req.path + " not found");
  }
  const Route* route = nullptr;
  std::string allow;
  for (const auto& r : it->second) {
    if (r.method == req.method) route = &r;
    allow += (allow.empty() ? "" : ", ") + r.method;
  }
  if (route == nullptr) {
    HttpResponse res = error_response(405, "method " + req.method + " not allowed on " + req.path);
    res.headers.emplace_back("Allow", allow);
    return res;
  }
  if (route->protected_route && !api_key_.empty() &&
      !authorization_matches(req.header("authorization"), api_key_)) {
    HttpResponse res = error_response(401, "invalid or missing API key");
    res.headers.emplace_back("WWW-Authenticate", "Bearer");
    return res;
  }
  try {
    return route->handler(req);
  } catch (const frontend::ApiError& e) {
    return error_response(e);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kInvalidArgument) return error_response(400, e.what());
    INFLIGHT_LOG_ERROR("{} {}: {}", req.method, req.path, e.what());
    return error_response(500, e.what());
  } catch (const std::exception& e) {
    INFLIGHT_LOG_ERROR("{} {}: {}", req.method, req.path, e.what());
    return error_response(500, std::string("internal error: ") + e.what());
  } catch (...) {
    return error_response(500, "internal error");
  }
}

}  // namespace inflight::server
