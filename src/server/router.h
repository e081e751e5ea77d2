// Router: (method, path) -> handler, with the error handling every route shares. A path is
// matched exactly, else by the longest registered prefix (routes with parameters in the path,
// e.g. /v2/models/{model}/infer, parse the rest themselves).
//
//   unknown path            404
//   known path, other verb  405 with Allow
//   HEAD of a GET route     the GET's answer (the transport sends no body)
//   route needs a key and the request lacks the right "Authorization: Bearer <key>", or
//   carries more than one Authorization header                                       401
//   POST with a Content-Type that is not JSON (or, where the route takes binary bodies,
//   application/octet-stream; server/content_type.h)                                 415
//   handler throws                        frontend/error_mapping.h (ApiError as it is,
//                                         inflight::Error by its code, anything else 500)
// all answered in OpenAI's error shape.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "server/http.h"

namespace inflight::server {

class Router {
 public:
  // `api_key` empty: no route needs a key.
  explicit Router(std::string api_key = {});

  // `protected_route`: requires the API key (when one is set).
  void add(std::string method, std::string path, HttpHandler handler, bool protected_route);
  // Every path that starts with `prefix` and has no exact route. `binary_body`: a POST may
  // also carry application/octet-stream (KServe's binary tensors).
  void add_prefix(std::string method, std::string prefix, HttpHandler handler, bool protected_route,
                  bool binary_body);

  // Never throws.
  HttpResponse handle(const HttpRequest& req) const;

  // (method, path) of every route: by path, a path's methods in the order added (no HEAD).
  std::vector<std::pair<std::string, std::string>> routes() const;

 private:
  struct Route {
    std::string method;
    HttpHandler handler;
    bool protected_route = false;
    bool binary_body = false;
  };
  std::string api_key_;
  std::map<std::string, std::vector<Route>, std::less<>> routes_;    // by path
  std::map<std::string, std::vector<Route>, std::less<>> prefixes_;  // by path prefix
};

}  // namespace inflight::server
