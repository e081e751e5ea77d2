// The pages and documents the server answers with itself (server/assets): the playground at
// /, the route list at /docs and the OpenAPI description at /openapi.json.
//
// The HTML pages carry a Content-Security-Policy that allows nothing but their own inline
// script and style (by hash) and requests to this server (connect-src 'self'): no external
// asset, no frame, no form, no plugin. The playground shows model output as text only.
#pragma once

#include "server/assets/assets.h"
#include "server/http.h"

namespace inflight::server {

// 200 text/html; charset=utf-8 with the policy above, nosniff and no referrer.
HttpResponse html_page(const assets::Page& page);

// 200 application/json: the OpenAPI 3.1 description of every route.
HttpResponse openapi_document();

}  // namespace inflight::server
