#include "bench/engine_runs.h"

#include <chrono>
#include <optional>

#include <nlohmann/json.hpp>

namespace inflight::bench {

DeviceTime device_time_between(const EngineStats& before, const EngineStats& after) {
  return DeviceTime{after.device_busy_seconds - before.device_busy_seconds,
                    after.device_idle_seconds - before.device_idle_seconds};
}

void add_device_time(nlohmann::json& result, const DeviceTime& t) {
  if (!t.measured()) return;
  result["device_busy_s"] = t.busy_s;
  result["device_idle_s"] = t.idle_s;
  result["device_idle_fraction"] = t.idle_fraction();
}

std::vector<EngineRequestTrace> run_all(Engine& engine, std::vector<Request> requests) {
  std::vector<EngineRequestTrace> traces(requests.size());
  std::vector<std::optional<RequestHandle>> handles(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto handle = engine.enqueue(std::move(requests[i]));
    if (handle.ok()) {
      handles[i] = std::move(handle).value();
    } else {
      traces[i].error = handle.status().to_string();
    }
  }
  std::vector<RequestOutput> outputs;
  for (size_t i = 0; i < handles.size(); ++i) {
    if (!handles[i]) continue;
    EngineRequestTrace& t = traces[i];
    OutputStream& stream = *handles[i]->stream;
    while (!stream.done()) {
      outputs.clear();
      stream.wait_pop(outputs, std::chrono::milliseconds(100));
      for (const RequestOutput& out : outputs) {
        if (!out.token_ids.empty()) t.token_times.push_back(out.time);
        if (out.finish_reason == FinishReason::kError ||
            out.finish_reason == FinishReason::kAbort) {
          t.error =
              out.error.empty() ? std::string(finish_reason_name(*out.finish_reason)) : out.error;
        }
        if (out.request_finished) {
          t.prompt_tokens = out.usage.prompt_tokens;
          t.output_tokens = out.usage.completion_tokens;
          t.finished = out.timings.finished != TimePoint{} ? out.timings.finished : out.time;
        }
      }
    }
    t.ok = t.error.empty() && !t.token_times.empty();
    if (!t.ok && t.error.empty()) t.error = "no token was generated";
  }
  return traces;
}

}  // namespace inflight::bench
