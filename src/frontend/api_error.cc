#include "frontend/api_error.h"

#include <nlohmann/json.hpp>

namespace inflight::frontend {

ApiError::ApiError(int status, std::string message, std::string param)
    : std::runtime_error(std::move(message)), status_(status), param_(std::move(param)) {}

const char* ApiError::type() const { return error_type(status_); }

void throw_bad_request(std::string message, std::string param) {
  throw ApiError(400, std::move(message), std::move(param));
}

void throw_not_found(std::string message, std::string param) {
  throw ApiError(404, std::move(message), std::move(param));
}

const char* error_type(int status) {
  switch (status) {
    case 400: return "BadRequestError";
    case 401: return "AuthenticationError";
    case 403: return "PermissionDeniedError";
    case 404: return "NotFoundError";
    case 405: return "MethodNotAllowed";
    case 408: return "RequestTimeout";
    case 413: return "RequestTooLarge";
    case 415: return "UnsupportedMediaType";
    case 422: return "UnprocessableEntityError";
    case 431: return "RequestHeaderFieldsTooLarge";
    case 429: return "RateLimitError";
    case 503: return "ServiceUnavailableError";
    default: return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

std::string error_body(int status, const std::string& message, const std::string& param) {
  nlohmann::json error = {{"message", message},
                          {"type", error_type(status)},
                          {"param", param.empty() ? nlohmann::json() : nlohmann::json(param)},
                          {"code", status}};
  // Replace, not throw, on invalid UTF-8 echoed back from a request.
  return nlohmann::json{{"error", std::move(error)}}.dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace);
}

std::string error_body(const ApiError& error) {
  return error_body(error.status(), error.what(), error.param());
}

}  // namespace inflight::frontend
