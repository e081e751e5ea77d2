// The server's endpoints, registered on a Router. Each group lives in its own file:
//
//   openai_routes.cc   POST /v1/completions, POST /v1/chat/completions, GET /v1/models
//   tgi_routes.cc      POST /generate, POST /generate_stream (Text Generation Inference)
//   tokenize_routes.cc POST /tokenize, POST /detokenize (vLLM's shapes)
//   info_routes.cc     GET /health, GET /metrics, GET /version, GET /info
//
// /v1/* and the generation routes need the API key when one is set; /health and /metrics
// do not (probes and scrapers carry none).
#pragma once

#include <functional>

#include "server/http_server.h"
#include "server/router.h"
#include "server/server_context.h"

namespace inflight::server {

void add_openai_routes(Router& router, ServerContext& ctx);
void add_tgi_routes(Router& router, ServerContext& ctx);
void add_tokenize_routes(Router& router, ServerContext& ctx);
void add_info_routes(Router& router, ServerContext& ctx,
                     std::function<HttpServerStats()> http_stats);

// Content type and headers of every SSE response.
HttpResponse sse_response(std::shared_ptr<StreamBody> body);

}  // namespace inflight::server
