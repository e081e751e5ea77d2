// How failures of the engine and the front end reach Python: one translator, registered once,
// turns each C++ error into the Python exception a caller expects (ValueError for a bad argument
// or a request that cannot fit, FileNotFoundError for a missing model, RuntimeError otherwise).
#pragma once

#include <nanobind/nanobind.h>

#include <stdexcept>
#include <string>

#include "inflight/status.h"

namespace inflight::python {

// A non-ok Status thrown across the binding.
class StatusError : public std::runtime_error {
 public:
  explicit StatusError(Status status)
      : std::runtime_error(status.message()), status_(std::move(status)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// Throws StatusError when `status` is not ok; `what` prefixes the message ("cannot start the
// engine: ...").
void throw_if_error(const Status& status, const std::string& what = {});

void register_error_translator();

}  // namespace inflight::python
