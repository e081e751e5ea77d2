// ApiError: a request that cannot be served, with the HTTP status and OpenAI's error shape:
//
//   {"error": {"message": "...", "type": "BadRequestError", "param": "temperature", "code": 400}}
//
// Validation code throws ApiError; the router catches it (and inflight::Error, and anything
// else) and answers with error_response(), so no exception crosses the server boundary.
#pragma once

#include <stdexcept>
#include <string>

#include "server/http.h"

namespace inflight::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {});
  int status() const { return status_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string param_;
};

// Shorthands for the common classes.
[[noreturn]] void throw_bad_request(std::string message, std::string param = {});
[[noreturn]] void throw_not_found(std::string message, std::string param = {});

// OpenAI's `type` for a status: 400 BadRequestError, 401 AuthenticationError, 404
// NotFoundError, 405 MethodNotAllowed, 413 RequestTooLarge, 429 RateLimitError, 503
// ServiceUnavailableError, 5xx InternalServerError.
const char* error_type(int status);

// The JSON body (no trailing newline) and the full response.
std::string error_body(int status, const std::string& message, const std::string& param = {});
HttpResponse error_response(int status, const std::string& message, const std::string& param = {});
HttpResponse error_response(const ApiError& error);

}  // namespace inflight::server
