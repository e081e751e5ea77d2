#include "errors.h"

#include "core/check.h"
#include "frontend/api_error.h"

namespace inflight::python {
namespace {

PyObject* exception_for(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kResourceExhausted:  // can never fit: the request's fault, as vLLM says
    case StatusCode::kUnsupported:
      return PyExc_ValueError;
    case StatusCode::kNotFound:
      return PyExc_KeyError;
    default:
      return PyExc_RuntimeError;
  }
}

PyObject* exception_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kInvalidFile:
    case ErrorCode::kUnsupported:
      return PyExc_ValueError;
    case ErrorCode::kNotFound:
      return PyExc_FileNotFoundError;
    case ErrorCode::kOutOfMemory:
      return PyExc_MemoryError;
    default:
      return PyExc_RuntimeError;
  }
}

}  // namespace

void throw_if_error(const Status& status, const std::string& what) {
  if (status.ok()) return;
  throw StatusError(
      Status(status.code(), what.empty() ? status.message() : what + ": " + status.message()));
}

void register_error_translator() {
  nanobind::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      PyErr_SetString(exception_for(e.status().code()), e.what());
    } catch (const frontend::ApiError& e) {
      PyErr_SetString(e.status() >= 500 ? PyExc_RuntimeError : PyExc_ValueError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(exception_for(e.code()), e.message().c_str());
    }
  });
}

}  // namespace inflight::python
