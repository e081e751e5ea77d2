// The KServe v2 HTTP/REST endpoints (Triton's), over frontend/kserve_api.h, for every model of
// the registry:
//
//   GET  /v2/health/live, /v2/health/ready                 200, or 503 while loading
//   GET  /v2                                               server metadata
//   GET  /v2/models/{model}[/versions/{v}]                 model metadata
//   GET  /v2/models/{model}[/versions/{v}]/ready           200, or 503 / 404
//   GET  /v2/models/{model}[/versions/{v}]/config          Triton's model configuration
//   GET  /v2/models[/{model}[/versions/{v}]]/stats         Triton's statistics (all models
//                                                          without {model})
//   POST /v2/models/{model}[/versions/{v}]/infer           JSON (+ binary tensor extension)
//   POST /v2/models/{model}[/versions/{v}]/generate        generate extension, one JSON body
//   POST /v2/models/{model}[/versions/{v}]/generate_stream generate extension, SSE
//
// Triton's model repository extension:
//
//   POST /v2/repository/index                 [{"name", "version", "state", "reason"}]; body
//                                             {"ready": true}: only the READY models
//   POST /v2/repository/models/{model}/load   200 {} once loaded; 400 {"error"} with the load's
//                                             error, the server serving on
//   POST /v2/repository/models/{model}/unload 200 {} at once: the model takes no new request,
//                                             its requests in flight finish, then its engine
//                                             stops (index: UNLOADING, then UNAVAILABLE)
//
// load and unload need `explicit_model_control` (Triton's --model-control-mode explicit), else
// they answer 400.
//
// Errors answer in Triton's shape, {"error": "message"}: a malformed request 400, an unknown
// model or version 404, a server still loading 503. The POST routes need the API key when one
// is set.
#pragma once

#include "frontend/model_registry.h"
#include "server/router.h"

namespace inflight::server {

void add_kserve_routes(Router& router, frontend::ModelRegistry& registry);
void add_kserve_repository_routes(Router& router, frontend::ModelRegistry& registry,
                                  bool explicit_model_control);

}  // namespace inflight::server
