// ApiError: a request that cannot be served, as an API answers it: an HTTP-like numeric status,
// OpenAI's error type for that status, a message a client can act on, and the field at fault:
//
//   {"error": {"message": "...", "type": "BadRequestError", "param": "temperature", "code": 400}}
//
// Front-end code throws ApiError; a transport catches it, and every other exception through
// error_mapping.h, so no exception crosses its boundary.
#pragma once

#include <stdexcept>
#include <string>

namespace inflight::frontend {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {});
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  // OpenAI's `type` for status() (error_type).
  const char* type() const;

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

// The JSON body of an error (no trailing newline).
std::string error_body(int status, const std::string& message, const std::string& param = {});
std::string error_body(const ApiError& error);

}  // namespace inflight::frontend
