// The server's endpoints, registered on a Router: thin handlers that pass the body to the front
// end (src/frontend) and write what it returns as HTTP.
//
//   POST /v1/completions, POST /v1/chat/completions, GET /v1/models     frontend/openai_api.h
//   POST /generate, POST /generate_stream, GET /info                    frontend/tgi_api.h
//   POST /models/{m}[/generate|/generate_stream], GET /models/{m}/info   the same, for model m
//   POST /tokenize, POST /detokenize                                    frontend/tokenize_api.h
//   /v2/... (KServe v2, Triton's)                                       server/kserve_routes.h
//   /v2/repository/... (Triton's model repository extension)           server/kserve_routes.h
//   GET /health, GET /metrics, GET /version
//
// Every model route picks its model from the registry (frontend/model_registry.h): the OpenAI
// and tokenize routes by the body's `model`, the TGI routes by the /models/{m} path (the bare
// routes serve the one model when only one is loaded), KServe by the /v2/models/{m} path.
// /health and /metrics cover every model.
//   GET /, GET /docs, GET /openapi.json                                 server/static_pages.h
//
// /v1/* and the generation routes need the API key when one is set; /health, /metrics,
// /version, /info and the static pages do not (probes and scrapers carry none; the playground
// asks for the key). server/assets/openapi.json describes every route (tests/server/
// openapi_test.cc fails on one it lacks).
#pragma once

#include <functional>
#include <string>

#include "frontend/model_registry.h"
#include "server/http_server.h"
#include "server/router.h"

namespace inflight::server {

// `explicit_model_control`: /v2/repository/models/{m}/load|unload are allowed (Triton's
// --model-control-mode explicit); else they answer 400.
void add_routes(Router& router, frontend::ModelRegistry& registry, std::string metrics_prefix,
                std::function<HttpServerStats()> http_stats, bool explicit_model_control = false);

}  // namespace inflight::server
