// One error vocabulary for the whole project.
//
//   INFLIGHT_CHECK(cond, "format {}", args...)  throws inflight::Error when cond is false.
//   INFLIGHT_FAIL("format {}", args...)         throws unconditionally.
//
// what() carries the source location ("msg (src/engine/sampler.cc:167)"), for logs; message() is
// the text without it, for anything a client sees. Exceptions never cross the public API or the
// server boundary: there they become a Status or an HTTP error.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace inflight {

// Broad classes of failure, so callers at a boundary can map them (e.g. to HTTP status codes).
enum class ErrorCode {
  kInternal,          // a bug or a broken invariant
  kInvalidArgument,   // the caller passed something wrong (bad shape, bad value)
  kInvalidFile,       // a model/tokenizer file is truncated, malformed or hostile
  kUnsupported,       // a valid input we do not handle (tensor type, architecture, ...)
  kOutOfMemory,       // an allocation failed
  kNotFound,          // a file, key or tensor is missing
};

class Error : public std::runtime_error {
 public:
  // `location` ("src/x.cc:12"; empty for none) is appended to what() only.
  Error(ErrorCode code, const std::string& message, const std::string& location = {})
      : std::runtime_error(location.empty() ? message : message + " (" + location + ")"),
        code_(code),
        message_(message) {}
  ErrorCode code() const { return code_; }
  // The message without the source location.
  const std::string& message() const { return message_; }

 private:
  ErrorCode code_;
  std::string message_;
};

namespace detail {
[[noreturn]] void throw_error(ErrorCode code, const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace inflight

#define INFLIGHT_THROW(code, ...) \
  ::inflight::detail::throw_error((code), __FILE__, __LINE__, ::fmt::format(__VA_ARGS__))

#define INFLIGHT_FAIL(...) INFLIGHT_THROW(::inflight::ErrorCode::kInternal, __VA_ARGS__)

#define INFLIGHT_CHECK(cond, ...)                                                     \
  do {                                                                                \
    if (!(cond)) [[unlikely]] INFLIGHT_THROW(::inflight::ErrorCode::kInternal, __VA_ARGS__); \
  } while (0)

// Same as INFLIGHT_CHECK with an explicit error class.
#define INFLIGHT_CHECK_CODE(cond, code, ...)                  \
  do {                                                        \
    if (!(cond)) [[unlikely]] INFLIGHT_THROW((code), __VA_ARGS__); \
  } while (0)
