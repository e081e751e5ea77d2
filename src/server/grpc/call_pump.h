// CallPump: one thread that runs the calls woken by the engine. The engine thread only marks a
// call woken (wake), never formats or writes, so a slow client or a big response costs it
// nothing. A call is queued at most once until its pump runs; a call already gone (its
// weak_ptr expired) is skipped.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace inflight::server {

class PumpedCall {
 public:
  virtual ~PumpedCall() = default;
  // Takes the outputs ready now and sends what they make. Runs on the pump thread.
  virtual void pump() = 0;

 private:
  friend class CallPump;
  std::atomic<bool> queued_{false};
};

class CallPump {
 public:
  CallPump();
  ~CallPump();  // runs what is queued, then joins
  // Any thread.
  void wake(const std::shared_ptr<PumpedCall>& call);

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::weak_ptr<PumpedCall>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace inflight::server
