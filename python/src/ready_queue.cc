#include "ready_queue.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace inflight::python {

ReadyQueue::ReadyQueue() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
}

ReadyQueue::~ReadyQueue() {
  close(fd_);
}

void ReadyQueue::push(RequestId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  ids_.push_back(id);
  if (ids_.size() == 1) {
    const uint64_t one = 1;
    // NOTE: cannot fail short of a counter overflow (2^64 - 1 unread signals).
    [[maybe_unused]] const ssize_t n = write(fd_, &one, sizeof(one));
  }
}

std::vector<RequestId> ReadyQueue::take() {
  std::vector<RequestId> ids;
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t n = read(fd_, &count, sizeof(count));  // EAGAIN when clear
  ids.swap(ids_);
  return ids;
}

}  // namespace inflight::python
