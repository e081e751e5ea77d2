// StepWatchdog: a step of a parallel job that does not finish within a time limit ends the job.
//
// A rank that hangs (a GPU fault, a stopped process) leaves the others waiting in a collective
// forever; MPI notices a rank that dies, not one that hangs. Each rank arms the watchdog around
// the work rank 0 asked of it; past the limit (INFLIGHT_STEP_TIMEOUT_S, default 300 s, 0: none)
// it calls the roll (World::silent_ranks), logs which rank gave up on what and which ranks do
// not answer (the hung ones), and ends every rank (World::abort). Armed or not, its thread
// answers the other ranks' roll calls every 200 ms, and ends every rank as soon as the process of
// another rank on this machine has ended (World::gone_ranks).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "parallel/world.h"

namespace inflight {

class StepWatchdog {
 public:
  explicit StepWatchdog(World& world);
  ~StepWatchdog();
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

  // `what` ("a step") has started / finished on this rank.
  void arm(const char* what);
  void disarm();
  // Ends the watchdog's thread (the destructor does too): no MPI call from it after this.
  void stop();

 private:
  void watch();

  World& world_;
  std::chrono::seconds limit_;
  std::mutex mutex_;
  std::condition_variable cv_;
  const char* what_ = nullptr;  // armed while non-null
  std::chrono::steady_clock::time_point since_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace inflight
