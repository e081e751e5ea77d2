// ReadyQueue: which requests have outputs waiting, signalled through an eventfd so that an
// asyncio loop wakes on it (loop.add_reader) without polling and the engine thread never takes
// the GIL.
//
//   engine thread (Request::notify)       push(id): id appended; the fd becomes readable when
//                                         the queue was empty
//   loop thread (reader callback)         take(): every id pushed since the last take, the fd
//                                         drained
// Invariant (under mutex_): the fd is readable iff ids_ is not empty.
#pragma once

#include <mutex>
#include <vector>

#include "inflight/request.h"

namespace inflight::python {

class ReadyQueue {
 public:
  ReadyQueue();  // throws std::system_error when no eventfd can be made
  ~ReadyQueue();
  ReadyQueue(const ReadyQueue&) = delete;
  ReadyQueue& operator=(const ReadyQueue&) = delete;

  int fd() const { return fd_; }
  void push(RequestId id);
  // The ids pushed since the last take (in order, possibly repeated).
  std::vector<RequestId> take();

 private:
  int fd_ = -1;
  std::mutex mutex_;
  std::vector<RequestId> ids_;
};

}  // namespace inflight::python
