#include "parallel/step_watchdog.h"

#include <cstdlib>

#include "core/logging.h"

namespace inflight {
namespace {

std::chrono::seconds step_timeout() {
  const char* v = std::getenv("INFLIGHT_STEP_TIMEOUT_S");
  return std::chrono::seconds(v != nullptr && *v != '\0' ? std::atoll(v) : 300);
}

}  // namespace

StepWatchdog::StepWatchdog(World& world) : world_(world), limit_(step_timeout()) {
  if (limit_.count() > 0) thread_ = std::thread([this] { watch(); });
}

StepWatchdog::~StepWatchdog() {
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
    if (what_ == nullptr) {
      cv_.wait(lock);
      continue;
    }
    const auto deadline = since_ + limit_;
    const char* what = what_;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && what_ == what &&
        std::chrono::steady_clock::now() >= since_ + limit_) {
      INFLIGHT_LOG_ERROR(
          "rank {} of {}: {} has not finished after {} s (INFLIGHT_STEP_TIMEOUT_S): another rank "
          "is hung or gone; stopping every rank",
          world_.rank(), world_.size(), what, limit_.count());
      world_.abort(1);
    }
  }
}

}  // namespace inflight
