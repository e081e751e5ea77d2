// StreamState: what an OutputStream shares with the engine loop.
//
// The engine appends under `mutex` and never waits for the client; the client takes
// everything queued at once. `finished` turns true with the request's final output.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "inflight/request.h"

namespace inflight::detail {

struct StreamState {
  explicit StreamState(RequestId request_id, std::function<void()> notify_fn)
      : id(request_id), notify(std::move(notify_fn)) {}

  // Engine side: queues outputs (the last one may end the stream), then wakes the client.
  void push(std::vector<RequestOutput>& outputs);

  const RequestId id;
  const std::function<void()> notify;  // Request::notify; runs on the engine thread
  mutable std::mutex mutex;
  std::condition_variable cv;
  std::deque<RequestOutput> queue;  // guarded by mutex
  bool finished = false;            // guarded by mutex
};

}  // namespace inflight::detail
