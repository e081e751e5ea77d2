// Waiting on the engine's output streams, shared by the offline and latency benchmarks.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "inflight/engine.h"
#include "inflight/stats.h"

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

// The engine's device time over a measured section (zero where the device keeps no timeline):
// busy while steps ran, idle between steps that followed each other (EngineStats).
struct DeviceTime {
  double busy_s = 0.0;
  double idle_s = 0.0;

  bool measured() const { return busy_s > 0.0; }
  double idle_fraction() const { return measured() ? idle_s / (busy_s + idle_s) : 0.0; }
  DeviceTime& operator+=(const DeviceTime& o) {
    busy_s += o.busy_s;
    idle_s += o.idle_s;
    return *this;
  }
};
DeviceTime device_time_between(const EngineStats& before, const EngineStats& after);
// Adds "device_busy_s", "device_idle_s" and "device_idle_fraction" to a result, when measured.
void add_device_time(nlohmann::json& result, const DeviceTime& t);

// Enqueues every request at once (the offline setting: no arrival process), then waits for all
// of them. A request the engine refuses is a failed trace with the status as its error.
std::vector<EngineRequestTrace> run_all(Engine& engine, std::vector<Request> requests);

}  // namespace inflight::bench
