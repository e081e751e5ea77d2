#include "parallel/step_watchdog.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include <fmt/ranges.h>

#include "core/logging.h"

namespace inflight {
namespace {

std::chrono::seconds step_timeout() {
  const char* v = std::getenv("INFLIGHT_STEP_TIMEOUT_S");
  return std::chrono::seconds(v != nullptr && *v != '\0' ? std::atoll(v) : 300);
}

// How long a roll call waits for answers (every live rank answers within kAnswerEvery).
constexpr std::chrono::milliseconds kRollCallGrace{2000};
// How often the watchdog wakes to answer the other ranks' roll calls, armed or not.
constexpr std::chrono::milliseconds kAnswerEvery{200};

}  // namespace

StepWatchdog::StepWatchdog(World& world) : world_(world), limit_(step_timeout()) {
  if (limit_.count() > 0) thread_ = std::thread([this] { watch(); });
}

StepWatchdog::~StepWatchdog() {
  stop();
}

void StepWatchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StepWatchdog::arm(const char* what) {
  std::lock_guard<std::mutex> lock(mutex_);
  what_ = what;
  since_ = std::chrono::steady_clock::now();
  cv_.notify_all();
}

void StepWatchdog::disarm() {
  std::lock_guard<std::mutex> lock(mutex_);
  what_ = nullptr;
}

void StepWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    const char* what = what_;
    const auto deadline = since_ + limit_;
    const auto now = std::chrono::steady_clock::now();
    if (what == nullptr || now < deadline) {
      cv_.wait_until(lock,
                     what == nullptr ? now + kAnswerEvery : std::min(deadline, now + kAnswerEvery));
      lock.unlock();
      world_.answer_roll_calls();
      // Once the job has ended the other ranks' processes end as they should.
      if (const std::vector<int> gone = world_.ended() ? std::vector<int>{} : world_.gone_ranks();
          !gone.empty()) {
        INFLIGHT_LOG_ERROR("rank {} of {}: the process of {} {} has ended; stopping every rank",
                           world_.rank(), world_.size(), gone.size() == 1 ? "rank" : "ranks",
                           fmt::join(gone, ", "));
        world_.abort(1);
      }
      lock.lock();
      continue;
    }
    lock.unlock();
    // Past the limit: the ranks that no longer answer are the hung (or gone) ones.
    const std::vector<int> silent = world_.silent_ranks(kRollCallGrace);
    if (silent.empty()) {
      INFLIGHT_LOG_ERROR(
          "rank {} of {}: {} has not finished after {} s (INFLIGHT_STEP_TIMEOUT_S); every rank "
          "answers, so one is stuck on its device or in a collective; stopping every rank",
          world_.rank(), world_.size(), what, limit_.count());
    } else {
      INFLIGHT_LOG_ERROR(
          "rank {} of {}: {} has not finished after {} s (INFLIGHT_STEP_TIMEOUT_S): {} {} {} not "
          "answer (hung or gone); stopping every rank",
          world_.rank(), world_.size(), what, limit_.count(), silent.size() == 1 ? "rank" : "ranks",
          fmt::join(silent, ", "), silent.size() == 1 ? "does" : "do");
    }
    world_.abort(1);
  }
}

}  // namespace inflight
