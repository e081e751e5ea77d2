// Waiting on the engine's output streams, shared by the offline and latency benchmarks.
#pragma once

#include <string>
#include <vector>

#include "inflight/engine.h"

namespace inflight::bench {

// What one finished request looked like from the client's side of the engine API.
struct EngineRequestTrace {
  bool ok = false;
  std::string error;
  std::vector<TimePoint> token_times;  // one per output event carrying tokens (one per step)
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;
  TimePoint finished;
};

// Enqueues every request at once (the offline setting: no arrival process), then waits for all
// of them. A request the engine refuses is a failed trace with the status as its error.
std::vector<EngineRequestTrace> run_all(Engine& engine, std::vector<Request> requests);

}  // namespace inflight::bench
