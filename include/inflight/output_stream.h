// OutputStream: the per-request queue of RequestOutputs between the engine loop and a client.
//
// The engine thread only appends and never waits on the client. A client either polls with
// try_pop() after Request::notify fired (an asynchronous server) or blocks in wait_pop()
// (tools, tests). The stream ends after the output with request_finished == true.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "inflight/request.h"

namespace inflight {

namespace detail {
struct StreamState;
}

class OutputStream {
 public:
  explicit OutputStream(std::shared_ptr<detail::StreamState> state);
  ~OutputStream();

  RequestId id() const;

  // Appends every queued output to `out` without blocking; returns how many.
  size_t try_pop(std::vector<RequestOutput>& out);
  // Waits up to `timeout` until an output is queued (or the stream has ended), then try_pop().
  size_t wait_pop(std::vector<RequestOutput>& out, std::chrono::milliseconds timeout);
  // The final output has been queued (it may not have been taken yet).
  bool finished() const;
  // Finished, and every output taken.
  bool done() const;

 private:
  std::shared_ptr<detail::StreamState> state_;
};

}  // namespace inflight
