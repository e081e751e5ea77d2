#include "bench/run_info.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace inflight::bench {
namespace {

// stdout of a shell command with fixed text (no user input goes in), trailing newlines removed.
std::string command_output(const std::string& command) {
  std::string out;
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  if (pclose(pipe) != 0) return {};  // e.g. nvidia-smi present but no GPU
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

std::string detect_device() {
  std::string gpus =
      command_output("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader");
  if (!gpus.empty()) {
    std::string out;
    std::istringstream lines(gpus);
    std::string line;
    int count = 0;
    std::string first;
    while (std::getline(lines, line)) {
      if (count++ == 0) first = line;
    }
    const size_t comma = first.find(',');
    out = first.substr(0, comma);
    if (count > 1) out = std::to_string(count) + "x " + out;
    if (comma != std::string::npos) out += " (driver" + first.substr(comma + 1) + ")";
    return out;
  }
  return cpu_model() + " (" + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " cores)";
}

// The source tree's git HEAD, or $INFLIGHT_SOURCE_COMMIT where the binary runs away from its
// checkout (a GPU machine that received staged binaries).
std::string source_commit() {
  if (const char* staged = std::getenv("INFLIGHT_SOURCE_COMMIT"); staged != nullptr && *staged) {
    return staged;
  }
  const std::string git = "git -C '" INFLIGHT_SOURCE_DIR "' ";
  std::string head = command_output(git + "rev-parse HEAD");
  if (head.empty()) return "unknown";
  if (!command_output(git + "status --porcelain --untracked-files=no").empty()) head += "+dirty";
  return head;
}

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  size_t start = 0;
  bool secret_next = false;
  while (start < raw.size()) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    std::string arg = raw.substr(start, end - start);
    // Credentials stay out of result files.
    if (secret_next) arg = "REDACTED";
    if (arg.rfind("--api-key=", 0) == 0) arg = "--api-key=REDACTED";
    secret_next = arg == "--api-key";
    if (!out.empty()) out += ' ';
    const bool plain = !arg.empty() && arg.find_first_of(" \t'\"$\\") == std::string::npos;
    out += plain ? arg : "'" + arg + "'";
    start = end + 1;
  }
  return out;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

RunInfo collect_run_info(const std::string& device_override) {
  RunInfo info;
  info.date = utc_now();
  info.device = device_override.empty() ? detect_device() : device_override;
  info.commit = source_commit();
  info.command = command_line();
  return info;
}

void add_run_info(nlohmann::json& result, const RunInfo& info) {
  result["date"] = info.date;
  result["device"] = info.device;
  result["commit"] = info.commit;
  result["command"] = info.command;
}

}  // namespace inflight::bench
