// Logging through spdlog. One logger, named "inflight", level from INFLIGHT_LOG_LEVEL.
#pragma once

#include <spdlog/spdlog.h>

namespace inflight {

// Sets up the process-wide logger (stderr, level from the environment). Idempotent.
void init_logging();

}  // namespace inflight

#define INFLIGHT_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define INFLIGHT_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define INFLIGHT_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define INFLIGHT_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
