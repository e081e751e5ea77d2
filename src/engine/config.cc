#include "inflight/config.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <sstream>
#include <string>

namespace inflight {
namespace {

Status invalid(std::string message) {
  return {StatusCode::kInvalidArgument, std::move(message)};
}

}  // namespace

Status EngineConfig::validate() const {
  if (block_size < 1 || block_size > 1024) {
    return invalid(fmt::format("block_size must be in [1, 1024], got {}", block_size));
  }
  if (num_kv_blocks < 0) {
    return invalid(
        fmt::format("num_kv_blocks must be >= 0 (0 = from kv_cache_bytes), got {}", num_kv_blocks));
  }
  if (!(kv_cache_memory_fraction >= 0.0 && kv_cache_memory_fraction <= 1.0)) {
    return invalid(fmt::format("kv_cache_memory_fraction must be in [0, 1], got {}",
                               kv_cache_memory_fraction));
  }
  if (!(gpu_memory_utilization >= 0.0 && gpu_memory_utilization <= 1.0)) {
    return invalid(fmt::format("gpu_memory_utilization must be in (0, 1] (0 = unset), got {}",
                               gpu_memory_utilization));
  }
  if (kv_cache_bytes < 0) {
    return invalid(
        fmt::format("kv_cache_bytes must be >= 0 (0 = automatic), got {}", kv_cache_bytes));
  }
  if (max_model_len < 0) {
    return invalid(
        fmt::format("max_model_len must be >= 0 (0 = the model's), got {}", max_model_len));
  }
  if (max_num_seqs < 0) {
    return invalid(
        fmt::format("max_num_seqs must be >= 0 (0 = from the memory plan), got {}", max_num_seqs));
  }
  if (max_num_batched_tokens < 0) {
    return invalid(fmt::format("max_num_batched_tokens must be >= 0 (0 = automatic), got {}",
                               max_num_batched_tokens));
  }
  if (!(schedule_conservativeness >= 0) || !std::isfinite(schedule_conservativeness)) {
    return invalid(fmt::format("schedule_conservativeness must be a finite number >= 0, got {}",
                               schedule_conservativeness));
  }
  if (long_prefill_token_threshold < 0) {
    return invalid(fmt::format("long_prefill_token_threshold must be >= 0, got {}",
                               long_prefill_token_threshold));
  }
  if (max_num_micro_batches < 0) {
    return invalid(
        fmt::format("max_num_micro_batches must be >= 0 (0 = one per pipeline stage), got {}",
                    max_num_micro_batches));
  }
  if (max_logprobs < 0) {
    return invalid(fmt::format("max_logprobs must be >= 0, got {}", max_logprobs));
  }
  return {};
}

Status parse_kv_cache_memory(std::string_view text, EngineConfig& config) {
  config.num_kv_blocks = 0;
  config.kv_cache_memory_fraction = 0.0;
  config.kv_cache_bytes = 0;
  if (text == "auto") return {};
  std::istringstream in{std::string(text)};
  double value = 0.0;
  in >> value;
  std::string unit;
  in >> unit;
  if (in.fail() && !in.eof()) {
    return invalid(fmt::format("kv cache memory: cannot parse '{}'", text));
  }
  if (!(value > 0 && std::isfinite(value))) {
    return invalid(fmt::format("kv cache memory must be positive, got '{}'", text));
  }
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.empty() && value <= 1.0) {
    config.kv_cache_memory_fraction = value;
    return {};
  }
  double scale = 1.0;
  if (unit == "K" || unit == "KB" || unit == "KIB") {
    scale = 1024.0;
  } else if (unit == "M" || unit == "MB" || unit == "MIB") {
    scale = 1024.0 * 1024;
  } else if (unit == "G" || unit == "GB" || unit == "GIB") {
    scale = 1024.0 * 1024 * 1024;
  } else if (!unit.empty() && unit != "B") {
    return invalid(fmt::format("kv cache memory: unknown unit '{}' in '{}'", unit, text));
  }
  config.kv_cache_bytes = static_cast<int64_t>(value * scale);
  return {};
}

}  // namespace inflight
