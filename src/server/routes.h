// The server's endpoints, registered on a Router: thin handlers that pass the body to the front
// end (src/frontend) and write what it returns as HTTP.
//
//   POST /v1/completions, POST /v1/chat/completions, GET /v1/models     frontend/openai_api.h
//   POST /generate, POST /generate_stream, GET /info                    frontend/tgi_api.h
//   POST /tokenize, POST /detokenize                                    frontend/tokenize_api.h
//   /v2/... (KServe v2, Triton's)                                       server/kserve_routes.h
//   GET /health, GET /metrics, GET /version
//   GET /, GET /docs, GET /openapi.json                                 server/static_pages.h
//
// /v1/* and the generation routes need the API key when one is set; /health, /metrics,
// /version, /info and the static pages do not (probes and scrapers carry none; the playground
// asks for the key). server/assets/openapi.json describes every route (tests/server/
// openapi_test.cc fails on one it lacks).
#pragma once

#include <functional>
#include <string>

#include "frontend/frontend.h"
#include "server/http_server.h"
#include "server/router.h"

namespace inflight::server {

void add_routes(Router& router, frontend::Frontend& frontend, std::string metrics_prefix,
                std::function<HttpServerStats()> http_stats);

}  // namespace inflight::server
