#include "engine/kv_cache_memory.h"

#include <cctype>
#include <cmath>
#include <sstream>
#include <string>

#include "core/check.h"

namespace inflight {

namespace {

constexpr double kAutoCudaFraction = 0.9;
constexpr int64_t kAutoCpuBytes = int64_t{512} << 20;

}  // namespace

void set_kv_cache_memory(std::string_view text, Device device, EngineConfig& config) {
  config.num_kv_blocks = 0;
  if (text == "auto") {
    config.kv_cache_memory_fraction = device == Device::kCuda ? kAutoCudaFraction : 0.0;
    config.kv_cache_bytes = kAutoCpuBytes;
    return;
  }
  std::istringstream in{std::string(text)};
  double value = 0.0;
  in >> value;
  std::string unit;
  in >> unit;
  INFLIGHT_CHECK_CODE(!in.fail() || in.eof(), ErrorCode::kInvalidArgument,
                      "--kv-cache-memory: cannot parse '{}'", text);
  INFLIGHT_CHECK_CODE(value > 0 && std::isfinite(value), ErrorCode::kInvalidArgument,
                      "--kv-cache-memory must be positive, got '{}'", text);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.empty() && value <= 1.0) {
    config.kv_cache_memory_fraction = value;
    return;
  }
  double scale = 1.0;
  if (unit == "K" || unit == "KB" || unit == "KIB") {
    scale = 1024.0;
  } else if (unit == "M" || unit == "MB" || unit == "MIB") {
    scale = 1024.0 * 1024;
  } else if (unit == "G" || unit == "GB" || unit == "GIB") {
    scale = 1024.0 * 1024 * 1024;
  } else {
    INFLIGHT_CHECK_CODE(unit.empty() || unit == "B", ErrorCode::kInvalidArgument,
                        "--kv-cache-memory: unknown unit '{}' in '{}'", unit, text);
  }
  config.kv_cache_memory_fraction = 0.0;
  config.kv_cache_bytes = static_cast<int64_t>(value * scale);
}

}  // namespace inflight
