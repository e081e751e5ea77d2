// RenderError: a failure while rendering, before it becomes an inflight::Error.
//
// Thrown from anywhere in the evaluator without a line; the interpreter stamps the line of the
// innermost expression or statement it passes through, and ChatTemplate::render reports it as
// Error(kInvalidArgument) with "line N: ...". Mirrors jinja2's exception classes so that tests
// can tell a template's own raise_exception() from an undefined value or a sandbox refusal.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace inflight::jinja {

class Value;

class RenderError : public std::runtime_error {
 public:
  enum class Kind {
    kRuntime,    // TypeError, ValueError, ... (jinja2 lets Python's exceptions through)
    kUndefined,  // UndefinedError: an undefined value was used
    kSecurity,   // SecurityError: the sandbox refused (e.g. list.append)
    kRaised,     // raise_exception(message) in the template
  };

  RenderError(Kind kind, std::string message)
      : std::runtime_error(std::move(message)), kind_(kind) {}

  Kind kind() const { return kind_; }
  int line() const { return line_; }
  void set_line(int line) {
    if (line_ == 0) line_ = line;
  }

 private:
  Kind kind_;
  int line_ = 0;  // 0 until the interpreter knows where
};

template <typename... Args>
[[noreturn]] void render_fail(fmt::format_string<Args...> format, Args&&... args) {
  throw RenderError(RenderError::Kind::kRuntime, fmt::format(format, std::forward<Args>(args)...));
}

// Raises the error for using an undefined value (its hint, or a security error).
[[noreturn]] void fail_undefined(const Value& value);

}  // namespace inflight::jinja
