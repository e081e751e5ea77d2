// The static files the server answers with, compiled into the binary from this directory
// (embed_asset.cmake): no file beside the binary is read at run time.
//
//   playground.html   GET /               chat with a served model in the browser
//   docs.html         GET /docs           the routes, rendered from /openapi.json
//   openapi.json      GET /openapi.json   OpenAPI 3.1 description of every route
#pragma once

#include <string_view>

namespace inflight::server::assets {

std::string_view playground_html();
std::string_view docs_html();
std::string_view openapi_json();

}  // namespace inflight::server::assets
