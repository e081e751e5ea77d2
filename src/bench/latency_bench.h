// `inflight bench latency`: one fixed batch of `batch_size` requests, all enqueued at once and
// all asking for exactly output_len tokens, repeated num_iters times after warm-up iterations,
// each iteration with new random prompts (so that no prefill is served from the prefix cache):
//
//   latency       enqueue .. last request finished, per iteration (vLLM `bench latency`'s
//                 avg_latency / percentiles)
//   TTFT          enqueue .. first token of the batch's last request to get one: the prefill of
//                 the whole batch, per iteration
//   decode step   the gap between consecutive token-carrying outputs of a request, pooled over
//                 requests and iterations: one engine step while the batch decodes
//   decode_tokens_per_s   batch_size / median decode step; prefill_tokens_per_s: the batch's
//                 prompt tokens / median TTFT
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "bench/engine_runs.h"
#include "bench/engine_setup.h"
#include "bench/run_info.h"
#include "bench/stats.h"

namespace inflight::bench {

struct LatencyBenchOptions {
  EngineSetupOptions engine;
  int32_t batch_size = 8;
  int32_t input_len = 32;
  int32_t output_len = 128;
  int32_t num_iters = 3;
  int32_t num_iters_warmup = 1;
  uint64_t seed = 0;
  std::vector<double> percentiles = {50, 90, 99};
};

struct LatencyBenchResult {
  std::string model;
  double load_seconds = 0.0;
  std::vector<double> latencies;  // seconds, one per measured iteration
  Summary latency_ms;
  Summary ttft_ms;
  Summary decode_step_ms;
  double decode_tokens_per_s = 0.0;
  double prefill_tokens_per_s = 0.0;
  DeviceTime device;  // over the measured iterations
};

LatencyBenchResult run_latency_bench(const LatencyBenchOptions& options);

void print_latency_table(std::FILE* out, const LatencyBenchResult& r, const LatencyBenchOptions& o);
nlohmann::json latency_result_json(const LatencyBenchResult& r, const LatencyBenchOptions& o,
                                   const RunInfo& info);

}  // namespace inflight::bench
