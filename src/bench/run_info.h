// What is recorded next to every benchmark number (GUIDE section 5): when, on what device, from
// which commit, by which command.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace inflight::bench {

struct RunInfo {
  std::string date;     // UTC, ISO 8601: "2025-01-31T12:00:00Z"
  std::string device;   // GPUs (nvidia-smi: name, driver) or else the CPU model and core count
  std::string commit;   // git HEAD of the source tree, "+dirty" when it has local changes
  std::string command;  // this process's command line
};

// `device_override` non-empty replaces the detected device (e.g. the server's, when the
// benchmark client runs on another machine).
RunInfo collect_run_info(const std::string& device_override = {});

// Adds the fields above ("date", "device", "commit", "command") to a result object.
void add_run_info(nlohmann::json& result, const RunInfo& info);

}  // namespace inflight::bench
