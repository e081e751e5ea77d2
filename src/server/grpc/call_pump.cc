#include "server/grpc/call_pump.h"

#include <pthread.h>

namespace inflight::server {

CallPump::CallPump() : thread_([this] { run(); }) {
  pthread_setname_np(thread_.native_handle(), "kserve-pump");  // for per-thread CPU accounting
}

CallPump::~CallPump() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void CallPump::wake(const std::shared_ptr<PumpedCall>& call) {
  if (call->queued_.exchange(true)) return;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(call);
  }
  cv_.notify_one();
}

void CallPump::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::shared_ptr<PumpedCall> call = queue_.front().lock();
    queue_.pop_front();
    lock.unlock();
    if (call) {
      // Cleared first: a wake during pump() queues the call again.
      call->queued_.store(false);
      call->pump();
    }
    lock.lock();
  }
}

}  // namespace inflight::server
