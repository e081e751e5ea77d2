#include "core/env.h"

#include <cstdlib>

namespace inflight {
namespace {

std::string get(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}

}  // namespace

const EnvConfig& env() {
  static const EnvConfig config = [] {
    EnvConfig c;
    c.log_level = get("INFLIGHT_LOG_LEVEL", c.log_level);
    c.num_threads = std::atoi(get("INFLIGHT_NUM_THREADS", "0").c_str());
    c.data_dir = get("INFLIGHT_DATA_DIR", "");
    c.model_dir = get("INFLIGHT_MODEL_DIR", "");
    return c;
  }();
  return config;
}

}  // namespace inflight
