// The HTTP responses the routes answer with: front-end results (JSON bodies, API errors) and
// streams, as HttpResponse.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "frontend/api_error.h"
#include "server/http.h"

namespace inflight::server {

// 200 application/json, invalid UTF-8 (partial token pieces) replaced by U+FFFD.
HttpResponse json_response(const nlohmann::ordered_json& body);

// An error in OpenAI's shape (frontend/api_error.h).
HttpResponse error_response(int status, const std::string& message, const std::string& param = {});
HttpResponse error_response(const frontend::ApiError& error);

// Content type and headers of every SSE response.
HttpResponse sse_response(std::shared_ptr<StreamBody> body);

}  // namespace inflight::server
