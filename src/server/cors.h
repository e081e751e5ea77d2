// Cross-origin resource sharing: off unless --allowed-origins names origins ("*" = any).
//
// Off, a browser page of another origin cannot read any response and cannot send a preflighted
// request (an OPTIONS preflight gets the router's answer, 404 or 405, with no CORS header).
// On, a request whose Origin is listed gets
//   Access-Control-Allow-Origin: <its origin>   ("*" when the list holds "*")
//   Vary: Origin
// and a preflight (OPTIONS with Origin and Access-Control-Request-Method) from a listed origin
// is answered 204 with the allowed methods, headers (authorization, content-type and those
// the preflight asks for) and Access-Control-Max-Age. Credentials (cookies) are never allowed:
// the API key travels in the Authorization header, which the page must hold anyway.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/http.h"

namespace inflight::server {

class CorsPolicy {
 public:
  // Origins as a browser sends them ("https://app.example:8443"), or "*".
  explicit CorsPolicy(std::vector<std::string> allowed_origins);

  bool enabled() const { return !origins_.empty(); }
  // The headers to add to the response to `req` (none when CORS is off or the origin is not
  // listed).
  HttpHeaders response_headers(const HttpRequest& req) const;
  // The 204 answer when `req` is a preflight from a listed origin, else nullopt.
  std::optional<HttpResponse> preflight(const HttpRequest& req) const;

 private:
  // The Access-Control-Allow-Origin value for `origin`, or "" when it is not listed.
  std::string allow_origin(const std::string* origin) const;

  std::vector<std::string> origins_;
  bool any_ = false;
};

}  // namespace inflight::server
