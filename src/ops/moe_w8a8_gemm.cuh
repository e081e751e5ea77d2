// The grouped expert GEMM of FP8 experts on FP8 tensor cores (W8A8), for the grouped path of
// moe_experts_cuda (ops/moe_experts_cuda.cu): a row's activations quantized to e4m3 with one
// dynamic scale per row (ops/fp8_rows.cuh), its expert's e4m3 weight rows as stored, and
//
//   y[r, n] = bf16(sa[r] * sum over 128-column K blocks b of f(n, b) * sum_{k in b} a[r, k] w[n,
//   k])
//
// with f the weight's block scale where the scales are 128 x 128 blocks (then the row scale is
// 1), and 1 where there is one scale or one per weight row (applied with sa at the end: y =
// bf16(sa[r] sw[n] acc)). Each block's partial sum comes from wgmma (e4m3 products are exact
// in f32; the tensor cores add them in their own order) and is added into an f32 total on the
// CUDA cores, so long K keeps full f32 accumulation. A row's result depends only on its own
// operands: not on the rest of its tile or of the batch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda_common.cuh"
#include "ops/moe_experts.h"

namespace inflight {

// Rows of a tile: two warpgroups of 64.
constexpr int32_t kMoeW8a8TileRows = 128;

struct MoeW8a8Gemm {
  const uint8_t* a = nullptr;       // e4m3 rows [*, k]
  const float* a_scales = nullptr;  // one per row of a
  const int32_t* a_rows = nullptr;  // row r reads a's row a_rows[r] / a_div; null: row r
  int32_t a_div = 1;
  const uint8_t* w = nullptr;  // [E, n, k] e4m3
  MoeWeightScales scales;
  cuda::bf16* y = nullptr;  // [pairs, n]
  // The tile table of moe_experts_cuda's align step, tiles of kMoeW8a8TileRows rows.
  const int32_t* tile_expert = nullptr;
  const int32_t* tile_start = nullptr;
  const int32_t* num_tiles = nullptr;
  const int32_t* expert_offsets = nullptr;
  int64_t n = 0;
  int64_t k = 0;
};

// Whether the kernel takes the product on this device: sm_90 (the sm_90a code), k a multiple
// of 16 and n of 2, a and w 16-byte aligned, and scales of one of the layouts above (blocks of
// 128 columns and a multiple of 128 rows, with n a multiple of 128).
bool moe_w8a8_gemm_fits(const MoeW8a8Gemm& g);

// max_tiles x ceil(n / 128) blocks; those of tiles past *num_tiles exit at once.
void moe_w8a8_gemm_cuda(const MoeW8a8Gemm& g, int64_t max_tiles, cudaStream_t stream);

}  // namespace inflight
