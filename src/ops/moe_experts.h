// moe_experts: the experts of a mixture-of-experts MLP (Mixtral, Qwen3-MoE) applied to the
// tokens the router sent them (ops/moe_route.h), weighted and summed:
//
//   out[t] = sum_j weights[t, j] * down[e] silu_mul(gate_up[e] x[t]),   e = ids[t, j]
//
//   x [T, hidden], ids / weights [T, k], gate_up [E, 2 I, hidden] (each expert's [gate; up],
//   as the dense MLP fuses them), down [E, hidden, I], out [T, hidden]; silu_mul as swiglu.
//
// Every (token, choice) pair p = t k + j is one row of the workspace (MoeWorkspace): its
// expert's gate/up output, the activation, and the expert's down output, each pair's row
// computed on its own, and the weighted sum over a token's k rows is taken in order
// j = 0..k-1 (runtime/moe_workspace.h).
//   CPU (the reference): row p belongs to pair p; experts are applied per pair (a row's result
//   does not depend on the batch).
//   CUDA: rows are grouped by expert (pairs sorted by expert: `sorted_pairs`, inverse
//   `pair_position`, group starts `expert_offsets`), each group cut into tiles of
//   kMoeTileRows rows or twice that (`tile_expert`, `tile_start`, `num_tiles`), and one grouped
//   GEMM over the tiles reads each expert's weights once per tile; the tile table is built on
//   the device, so nothing waits for the host and the step can be captured in a CUDA graph.
//   Small batches (T k <= E) take GEMVs per pair instead, fused with the activation and with
//   the weighted sum (of the workspace only act is used), unless the backend is in
//   batch-invariant mode (ops/ops_cuda.cuh moe_experts_cuda).
// An expert that gets no tokens costs nothing on either backend.
//
// FP8 experts: gate_up and down stored as e4m3 with f32 scales (runtime/linear.h's layouts over
// the stacked [E n, k] rows). The CPU, and CUDA's GEMVs and fallback kernels, dequantize each
// weight to the compute dtype as it is read, dtype(e4m3 value * scale) rounded once, exactly as
// a load-time dequantization would make it, so the result is the same as that of the
// dequantized weights, activations unquantized. CUDA's grouped path on sm_90, given workspace
// rows for them (act_q), quantizes the activations per row instead and multiplies on FP8 tensor
// cores (W8A8, ops/moe_wgmma_gemm.cuh): large batches are bound by the products.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "runtime/linear.h"
#include "runtime/moe_workspace.h"

namespace inflight {

// The scales of an e4m3 expert stack: row R of the stacked [E n, k] weight (expert R / n), column
// c, is scaled by s[(R / rows_per) * stride + (cols_per > 0 ? c / cols_per : 0)]: one scale
// (stride 0), one per row (rows_per 1, stride 1) or blocks of rows_per x cols_per.
struct MoeWeightScales {
  const float* s = nullptr;  // null: the weights are in the compute dtype
  int64_t rows_per = 1;
  int64_t cols_per = 0;
  int64_t stride = 0;
};

// The align step's tile table, as the grouped GEMMs read it: tile t holds the sorted pair rows
// tile_start[t].. of expert tile_expert[t], as many as the GEMM's tile rows up to the expert's
// end (expert_offsets[e + 1]); *num_tiles tiles.
struct MoeTileTable {
  const int32_t* tile_expert = nullptr;
  const int32_t* tile_start = nullptr;
  const int32_t* num_tiles = nullptr;
  const int32_t* expert_offsets = nullptr;
};

struct MoeExpertsParams {
  const void* x = nullptr;          // [tokens, hidden]
  const int32_t* ids = nullptr;     // [tokens, k]
  const float* weights = nullptr;   // [tokens, k]
  const void* gate_up_w = nullptr;  // [num_experts, 2 inter, hidden]
  const void* down_w = nullptr;     // [num_experts, hidden, inter]
  MoeWeightScales gate_up_scales;   // e4m3 weights only (fp8_weights)
  MoeWeightScales down_scales;
  void* out = nullptr;  // [tokens, hidden]
  // Workspace (MoeWorkspace), rows for tokens * k pairs.
  void* gate_up = nullptr;     // [pairs, 2 inter]
  void* act = nullptr;         // [pairs, inter]
  void* expert_out = nullptr;  // [pairs, hidden]
  int32_t* expert_offsets = nullptr;
  int32_t* sorted_pairs = nullptr;
  int32_t* pair_position = nullptr;
  int32_t* tile_expert = nullptr;
  int32_t* tile_start = nullptr;
  int32_t* num_tiles = nullptr;
  // FP8 experts' activations quantized per row (MoeWorkspace::act_q), or null: the workspace
  // has no rows for them (the experts then take the weight-only kernels on every path).
  uint8_t* act_q = nullptr;
  float* act_q_scales = nullptr;
  int64_t tokens = 0;
  int64_t hidden = 0;
  int64_t inter = 0;
  int64_t num_experts = 0;
  int32_t k = 0;
  DType dtype = DType::kF32;  // of x, out and the workspace
  bool fp8_weights = false;   // gate_up_w and down_w e4m3, with their scales

  int64_t pairs() const { return tokens * k; }
  MoeTileTable tile_table() const { return {tile_expert, tile_start, num_tiles, expert_offsets}; }
};

// Validates x [T, hidden] (float), ids [T, k] i32 and weights [T, k] f32, gate_up.weight
// [E, 2 I, hidden] and down.weight [E, hidden, I] (x's dtype, or both e4m3 with scales of a
// layout above: [1], [E n] or blocks [ceil(E n / block_rows), >= ceil(k / block_cols)]; biases
// are not supported) and out [T, hidden] of x's dtype, the workspace (at least T k rows, E + 1
// offsets, moe_max_tiles tiles), all on x's device, with 1 <= k <= min(E, kMoeMaxTopK),
// E <= kMoeMaxExperts and T k < 2^31. out must not alias x.
MoeExpertsParams make_moe_experts_params(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                         const Linear& gate_up, const Linear& down,
                                         const MoeWorkspace& ws, const Tensor& out);

// f32 only. Expert ids outside [0, E) are an error of the caller (moe_route never makes one).
void moe_experts_cpu(const MoeExpertsParams& p);

}  // namespace inflight
