#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>

#include "core/env.h"

namespace inflight {

void init_logging() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto logger = spdlog::stderr_color_mt("inflight");
    logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
    logger->set_level(spdlog::level::from_str(env().log_level));
    spdlog::set_default_logger(logger);
  });
}

}  // namespace inflight
