// Status and Result<T>: how the public API reports failure. Exceptions never cross it.
//
//   Result<RequestHandle> r = engine.enqueue(std::move(request));
//   if (!r.ok()) return reply_error(r.status());   // code() maps to an HTTP status
//   use(r.value());
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace inflight {

enum class StatusCode {
  kOk,
  kInvalidArgument,    // the request is malformed: bad sampling parameter, empty prompt, ...
  kNotFound,           // no live request with that id (never existed or already finished)
  kResourceExhausted,  // the request can never fit: longer than max_model_len or the KV cache
  kUnavailable,        // the engine is shutting down or has stopped
  kUnsupported,        // valid, but this engine cannot serve it (e.g. text without a tokenizer)
  kInternal,           // a bug or a failed device step
};

std::string_view status_code_name(StatusCode code);

class Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: temperature must be >= 0, got -1"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or a non-ok Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok()) {
      v_ = Status(StatusCode::kInternal, "Result constructed from an ok Status without a value");
    }
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // The error; an ok Status when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  // NOTE: reading the value of an error Result is a caller bug; it aborts with the status.
  T& value() & { return std::get<T>(checked()); }
  const T& value() const& { return std::get<T>(checked()); }
  T&& value() && { return std::get<T>(std::move(checked())); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status>& checked() {
    if (!ok()) die();
    return v_;
  }
  const std::variant<T, Status>& checked() const {
    if (!ok()) die();
    return v_;
  }
  [[noreturn]] void die() const {
    std::fprintf(stderr, "fatal: value() of an error Result: %s\n",
                 std::get<Status>(v_).to_string().c_str());
    std::abort();
  }

  std::variant<T, Status> v_;
};

}  // namespace inflight
