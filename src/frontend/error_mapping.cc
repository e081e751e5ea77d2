#include "frontend/error_mapping.h"

#include <exception>

#include "core/logging.h"

namespace inflight::frontend {

namespace {

constexpr const char* kInternalMessage = "internal server error";

ApiError internal_error(std::string_view context, std::string_view detail) {
  if (context.empty()) {
    INFLIGHT_LOG_ERROR("internal error: {}", detail);
  } else {
    INFLIGHT_LOG_ERROR("{}: internal error: {}", context, detail);
  }
  return ApiError(500, kInternalMessage);
}

}  // namespace

StatusCode status_code_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kInvalidFile: return StatusCode::kInvalidArgument;
    case ErrorCode::kUnsupported: return StatusCode::kUnsupported;
    case ErrorCode::kOutOfMemory: return StatusCode::kResourceExhausted;
    case ErrorCode::kNotFound: return StatusCode::kNotFound;
    case ErrorCode::kInternal: break;
  }
  return StatusCode::kInternal;
}

ApiError api_error_from(const Status& status, std::string_view context) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnsupported: return ApiError(400, status.message());
    case StatusCode::kNotFound: return ApiError(404, status.message());
    case StatusCode::kUnavailable: return ApiError(503, status.message());
    case StatusCode::kOk:  // a caller bug: an ok Status is no error
    case StatusCode::kInternal: break;
  }
  return internal_error(context, status.message());
}

ApiError api_error_from(const Error& error, std::string_view context) {
  const StatusCode code = status_code_of(error.code());
  // A client sees the message without the source location; the log gets what() whole.
  if (code == StatusCode::kInternal) return internal_error(context, error.what());
  return api_error_from(Status(code, error.message()), context);
}

ApiError engine_failure_error(std::string_view detail, std::string_view context) {
  return internal_error(
      context.empty() ? std::string_view("generation") : context,
      detail.empty() ? std::string_view("the request failed in the engine") : detail);
}

ApiError current_api_error(std::string_view context) {
  try {
    throw;
  } catch (const ApiError& e) {
    return e;
  } catch (const Error& e) {
    return api_error_from(e, context);
  } catch (const std::exception& e) {
    return internal_error(context, e.what());
  } catch (...) {
    return internal_error(context, "unknown exception");
  }
}

void throw_status(const Status& status) { throw api_error_from(status); }

}  // namespace inflight::frontend
