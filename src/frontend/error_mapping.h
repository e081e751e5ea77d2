// The one mapping from the project's failures to API errors. Every route catches through
// current_api_error() and every engine Status goes through api_error_from(Status), so a failure
// answers alike whichever way it arrives (thrown by the tokenizer inside a route, or returned by
// Engine::enqueue after the engine's own tokenization):
//
//   inflight::Error code          engine StatusCode     status  type
//   kInvalidArgument, kInvalidFile kInvalidArgument     400     BadRequestError
//   kOutOfMemory                   kResourceExhausted   400     BadRequestError
//   kUnsupported                   kUnsupported         400     BadRequestError
//   kNotFound                      kNotFound            404     NotFoundError
//                                  kUnavailable         503     ServiceUnavailableError
//   kInternal, any other exception kInternal            500     InternalServerError
//
// An ApiError passes through unchanged. A 500 says only "internal server error": the message
// (which carries the source location of the check that failed) goes to the log, never to the
// client. A 4xx carries Error::message(), the message without the source location.
//
// A request that fails inside the engine after it was accepted (FinishReason::kError, e.g. a
// model that computes NaN) is an internal error on every route: engine_failure_error.
#pragma once

#include <string_view>

#include "core/check.h"
#include "frontend/api_error.h"
#include "inflight/status.h"

namespace inflight::frontend {

// The engine's class for an Error (as Engine::enqueue reports an Error thrown inside it).
StatusCode status_code_of(ErrorCode code);

// `context` (e.g. "POST /v1/completions") prefixes what is logged for an internal error.
ApiError api_error_from(const Status& status, std::string_view context = {});
ApiError api_error_from(const Error& error, std::string_view context = {});

// The 500 of a request that finished with FinishReason::kError; `detail` (RequestOutput::error)
// is logged.
ApiError engine_failure_error(std::string_view detail, std::string_view context = {});

// The exception being handled; call only inside a catch block.
ApiError current_api_error(std::string_view context = {});

// Throws api_error_from(status).
[[noreturn]] void throw_status(const Status& status);

}  // namespace inflight::frontend
