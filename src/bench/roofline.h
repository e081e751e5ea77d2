// `inflight bench roofline`: what the device can do, measured, and the floors that puts under a
// model's figures (GUIDE section 5, "count first"):
//
//   copy bandwidth   device-to-device copy of a large buffer, bytes read + written per second
//                    (median of repeats after warm-up)
//   matrix rate      dense square GEMM in the backend's compute dtype through the backend's own
//                    GEMM path (cuBLASLt on CUDA), FLOP per second (median of repeats)
//
// and, for a model shape:
//   decode floor     bytes a decode step must read (every weight but the embedding table, whose
//                    rows are gathered) / copy bandwidth: no batch-1 step can be shorter
//   prefill floor    FLOPs of one prompt of `prefill_tokens` (linear layers for every token,
//                    causal attention, one logits row) / matrix rate
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "bench/run_info.h"
#include "formats/model_config.h"

namespace inflight::bench {

struct RooflineOptions {
  std::string device = "auto";
  int32_t repeats = 10;
  int64_t copy_bytes = 0;   // 0: 2 GiB on a GPU, 256 MiB on the CPU
  int64_t gemm_size = 0;    // m = n = k; 0: 8192 on a GPU, 1024 on the CPU
  int32_t prefill_tokens = 2048;
};

// Bytes and FLOPs of a model shape in an element type of `elem_bytes`.
struct ModelCost {
  int64_t weight_bytes = 0;       // every weight, the embedding table included
  // What a batch-1 decode step reads: all but the embedding table, and of a mixture of experts
  // only the num_experts_per_token experts of each layer that the token is routed to.
  int64_t decode_read_bytes = 0;
  int64_t prefill_flops = 0;  // one prompt of `tokens`: linear layers (active experts),
                              // attention, one row
};
ModelCost model_cost(const ModelConfig& c, int64_t elem_bytes, int64_t tokens);

struct Roofline {
  std::string device;         // the backend's description
  std::string compute_dtype;  // of the GEMM
  int64_t copy_bytes = 0;
  int64_t gemm_size = 0;
  double copy_bytes_per_s = 0.0;
  double matrix_flops_per_s = 0.0;
};

Roofline measure_roofline(const RooflineOptions& options);

// Prints the roofline and, with a model shape, its floors; the JSON holds the same figures.
void print_roofline(std::FILE* out, const Roofline& r, const std::optional<ModelConfig>& model,
                    const RooflineOptions& options);
nlohmann::json roofline_json(const Roofline& r, const std::optional<ModelConfig>& model,
                             const RooflineOptions& options, const RunInfo& info);

}  // namespace inflight::bench
