// The `--kv-cache-memory` value of the tools, applied to an EngineConfig:
//
//   "auto"                       a fraction 0.9 of the free device memory on CUDA (after weights
//                                and workspace), a fixed 512 MiB on the CPU
//   "0.9"                        a fraction in (0, 1] of the free memory after weights and
//                                workspace (device memory on CUDA, MemAvailable on the CPU)
//   "512MiB", "2G", "1073741824" bytes (binary units K/M/G, with or without "iB"/"B")
//
// Throws Error(kInvalidArgument) naming the text when it is none of these.
#pragma once

#include <string_view>

#include "core/tensor.h"
#include "inflight/config.h"

namespace inflight {

void set_kv_cache_memory(std::string_view text, Device device, EngineConfig& config);

}  // namespace inflight
