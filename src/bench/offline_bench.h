// `inflight bench offline`: the engine in-process with every request queued at once (the
// setting of TensorRT-LLM's `trtllm-bench throughput` and vLLM's `bench throughput`): how many
// tokens per second the engine produces when it is never starved of work.
//
//   elapsed_time             first enqueue .. last request finished (after one warm-up request)
//   output_throughput        generated tokens / elapsed_time
//   total_token_throughput   (prompt + generated tokens) / elapsed_time
// With --json-schema every request's output is constrained by that schema (structured output),
// and the host time spent filling token masks is reported:
//   mask_ns_per_token        mask-filling wall time / masks filled (one mask per constrained
//                            row and step; the rows of a step are filled in parallel)
//   mask_fraction            mask-filling wall time / elapsed_time
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/engine_runs.h"
#include "bench/engine_setup.h"
#include "bench/run_info.h"
#include "bench/stats.h"

namespace inflight::bench {

struct OfflineBenchOptions {
  EngineSetupOptions engine;
  int32_t input_len = 128;
  int32_t output_len = 128;
  int32_t num_prompts = 64;
  int32_t num_warmups = 1;
  uint64_t seed = 0;
  std::vector<double> percentiles = {50, 90, 99};
  std::string json_schema;  // constrains every request when set (JSON text)
};

struct OfflineBenchResult {
  std::string model;
  double load_seconds = 0.0;
  int32_t micro_batches = 1;  // steps in flight at most (EngineConfig::max_num_micro_batches)
  int32_t completed = 0;
  int32_t failed = 0;
  std::string first_error;
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  double elapsed_time = 0.0;
  double requests_per_second = 0.0;
  double output_throughput = 0.0;
  double total_token_throughput = 0.0;
  Summary ttft_ms;             // enqueue -> first token, per request
  Summary e2el_ms;             // enqueue -> finished, per request
  DeviceTime device;           // over the measured requests
  uint64_t preemptions = 0;    // sequences preempted (and recomputed) while measuring
  uint64_t grammar_masks = 0;  // token masks filled while measuring
  double grammar_mask_seconds = 0.0;
};

OfflineBenchResult run_offline_bench(const OfflineBenchOptions& options);

void print_offline_table(std::FILE* out, const OfflineBenchResult& r);
nlohmann::json offline_result_json(const OfflineBenchResult& r, const OfflineBenchOptions& o,
                                   const RunInfo& info);

}  // namespace inflight::bench
