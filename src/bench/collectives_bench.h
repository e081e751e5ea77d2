// `inflight bench collectives`: the all-reduce of tensor parallelism, timed on the ranks of one
// job (nccl-tests' definitions):
//
//   latency   one all-reduce of `bytes` (in place, the compute dtype), the mean over `iters`
//             back-to-back launches recorded as one CUDA graph (as a decode step launches them),
//             the slowest rank's
//   algbw     bytes / latency
//   busbw     algbw * 2 (T - 1) / T: what each GPU's links carry in a ring all-reduce, comparable
//             across rank counts with the links' bandwidth
//
// of the communicator as the engine uses it (on GPUs of one node: the one-shot all-reduce of
// backend/cuda/one_shot_all_reduce.h up to INFLIGHT_ONE_SHOT_ALL_REDUCE_MAX bytes, NCCL above),
// and of NCCL alone beside it.
//
// Every rank runs it (mpirun, or `--ranks N`, which starts them); rank 0 reports.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/run_info.h"

namespace inflight::bench {

struct CollectivesOptions {
  std::string device = "auto";
  std::vector<int64_t> sizes;  // bytes; empty: 8 KiB to 256 MiB, x4 steps (x2 up to 1 MiB)
  int32_t iters = 20;
  int32_t warmup = 5;
};

struct CollectiveTiming {
  int64_t bytes = 0;
  double latency_us = 0.0;  // the communicator as the engine uses it
  double algbw_gb_per_s = 0.0;
  double busbw_gb_per_s = 0.0;
  double nccl_latency_us = 0.0;  // NCCL alone (GPUs; 0 elsewhere)
  // Of one all-reduce of every rank's own values against the sum on the host (every path): the
  // run fails past bf16 (f32) rounding.
  double max_relative_error = 0.0;
};

struct CollectivesResult {
  int32_t ranks = 1;
  std::string backend;
  std::string dtype;
  bool graphs = false;  // launched from captured graphs
  std::vector<CollectiveTiming> all_reduce;
};

// Runs on every rank of this process's job (parallel/world.h); the result is rank 0's.
CollectivesResult run_collectives_bench(const CollectivesOptions& options);
void print_collectives_table(std::FILE* out, const CollectivesResult& r);
nlohmann::json collectives_result_json(const CollectivesResult& r, const CollectivesOptions& o,
                                       const RunInfo& info);

}  // namespace inflight::bench
