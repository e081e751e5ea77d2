// The KServe v2 HTTP/REST endpoints (Triton's), over frontend/kserve_api.h:
//
//   GET  /v2/health/live, /v2/health/ready                 200, or 503 while loading
//   GET  /v2                                               server metadata
//   GET  /v2/models/{model}[/versions/{v}]                 model metadata
//   GET  /v2/models/{model}[/versions/{v}]/ready           200, or 503 / 404
//   POST /v2/models/{model}[/versions/{v}]/infer           JSON (+ binary tensor extension)
//   POST /v2/models/{model}[/versions/{v}]/generate        generate extension, one JSON body
//   POST /v2/models/{model}[/versions/{v}]/generate_stream generate extension, SSE
//
// Errors answer in Triton's shape, {"error": "message"}: a malformed request 400, an unknown
// model or version 404, a server still loading 503. The POST routes need the API key when one
// is set.
#pragma once

#include "frontend/frontend.h"
#include "server/router.h"

namespace inflight::server {

void add_kserve_routes(Router& router, frontend::Frontend& frontend);

}  // namespace inflight::server
