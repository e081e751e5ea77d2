// MoeWorkspace: the scratch of one mixture-of-experts MLP call (Backend::moe_experts,
// ops/moe_experts.h), part of a model's preallocated workspace so that a step allocates nothing
// and a decode step can be captured in a CUDA graph.
//
// Rows are (token, choice) pairs p = t k + j of a step's T tokens routed to k experts each
// (T k rows). Which row holds which pair is the backend's: the CPU reference keeps pair order;
// CUDA sorts the pairs by expert (sorted_pairs / pair_position) and cuts each expert's group
// into tiles of kMoeTileRows rows or more (tile_expert, tile_start, num_tiles; the kernels pick
// the size), except for small batches, which keep pair order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace inflight {

// Experts per router at most (the CUDA router keeps one token's logits in a warp's registers),
// and experts per token at most.
constexpr int64_t kMoeMaxExperts = 1024;
constexpr int32_t kMoeMaxTopK = 32;

// Rows of one tile of the grouped expert GEMMs on CUDA, at least (kernels may take taller tiles:
// fewer tiles than the bound below).
constexpr int64_t kMoeTileRows = 32;

// Tiles of `pairs` rows over `num_experts` groups at most: each non-empty group ends in at most
// one partial tile.
inline int64_t moe_max_tiles(int64_t pairs, int64_t num_experts) {
  return (pairs + kMoeTileRows - 1) / kMoeTileRows + num_experts;
}

struct MoeWorkspace {
  Tensor gate_up;         // [>= T k, 2 I] compute dtype: each pair's expert [gate; up] output
  Tensor act;             // [>= T k, I]: silu(gate) * up
  Tensor expert_out;      // [>= T k, hidden]: the expert's down projection
  Tensor expert_offsets;  // [E + 1] i32: where each expert's group starts (CUDA)
  Tensor sorted_pairs;    // [>= T k] i32: the pair at each row (CUDA)
  Tensor pair_position;   // [>= T k] i32: the row of each pair (CUDA)
  Tensor tile_expert;     // [>= moe_max_tiles(T k, E)] i32 (CUDA)
  Tensor tile_start;      // [>= moe_max_tiles(T k, E)] i32: a tile's first row (CUDA)
  Tensor num_tiles;       // [1] i32 (CUDA)
  // FP8 experts on FP8 tensor cores (CUDA): the inputs of either product quantized to e4m3 with
  // one scale per row (x per token for gate/up, act per pair for down).
  Tensor act_q;         // [>= T k max(hidden, I)] e4m3
  Tensor act_q_scales;  // [>= T k] f32
};

// One buffer of a MoeWorkspace for `capacity` tokens: the single definition of the sizes, which
// model workspaces use both to count bytes and to allocate.
struct MoeWorkspaceBuffer {
  Tensor MoeWorkspace::*member;
  Shape shape;
  DType dtype;
};

// fp8_experts: the experts' weights are e4m3 (act_q and act_q_scales get their rows; else one
// element each, too few for any call).
inline std::vector<MoeWorkspaceBuffer> moe_workspace_buffers(int64_t capacity, int64_t k,
                                                             int64_t num_experts, int64_t hidden,
                                                             int64_t inter, DType dtype,
                                                             bool fp8_experts) {
  const int64_t pairs = capacity * k, tiles = moe_max_tiles(pairs, num_experts);
  const int64_t q_rows = fp8_experts ? pairs : 0;
  return {{&MoeWorkspace::gate_up, {pairs, 2 * inter}, dtype},
          {&MoeWorkspace::act, {pairs, inter}, dtype},
          {&MoeWorkspace::expert_out, {pairs, hidden}, dtype},
          {&MoeWorkspace::expert_offsets, {num_experts + 1}, DType::kI32},
          {&MoeWorkspace::sorted_pairs, {pairs}, DType::kI32},
          {&MoeWorkspace::pair_position, {pairs}, DType::kI32},
          {&MoeWorkspace::tile_expert, {tiles}, DType::kI32},
          {&MoeWorkspace::tile_start, {tiles}, DType::kI32},
          {&MoeWorkspace::num_tiles, {1}, DType::kI32},
          {&MoeWorkspace::act_q,
           {std::max<int64_t>(q_rows * std::max(hidden, inter), 1)},
           DType::kF8E4M3},
          {&MoeWorkspace::act_q_scales, {std::max<int64_t>(q_rows, 1)}, DType::kF32}};
}

}  // namespace inflight
