// The static files the server answers with, compiled into the binary from this directory
// (embed_asset.cmake): no file beside the binary is read at run time.
//
//   playground.html   GET /               chat with a served model in the browser
//   docs.html         GET /docs           the routes, rendered from /openapi.json
//   openapi.json      GET /openapi.json   OpenAPI 3.1 description of every route
#pragma once

#include <string_view>

namespace inflight::server::assets {

// An HTML page and the Content-Security-Policy sources that allow its inline code:
// "'sha256-<base64>' ..." of each <script> and each <style> element, computed at build time.
struct Page {
  std::string_view html;
  std::string_view script_sources;
  std::string_view style_sources;
};

Page playground_html();
Page docs_html();
std::string_view openapi_json();

}  // namespace inflight::server::assets
