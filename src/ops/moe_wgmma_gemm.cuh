// The grouped expert GEMM on Hopper's warpgroup tensor cores (wgmma, sm_90a), for the grouped
// path of moe_experts_cuda (ops/moe_experts_cuda.cu): each tile's rows of a (in pair order) times
// its expert's weight rows as stored, two operand kinds:
//
//   bf16:  y[r, n] = bf16(sum_k a[r, k] w[n, k])                 (bf16 experts)
//   W8A8:  y[r, n] = bf16(sa[r] * sum over 128-column K blocks b of f(n, b) * sum_{k in b}
//                    a[r, k] w[n, k])                             (FP8 experts)
//
// Both run on TMA copies and a producer warpgroup (moe_wgmma_gemm_cuda.cu), which needs a's rows
// contiguous: the down product's act, and for gate/up x's rows in pair order.
//
// W8A8: a row's activations quantized to e4m3 with one dynamic scale per row (ops/
// fp8_rows.cuh), the expert's e4m3 weights; f the weight's block scale where the scales are
// 128 x 128 blocks (then sw = 1), else 1 and y = bf16(sa[r] sw[n] acc) with sw the weight's
// scale (one, or one per row). Each block's partial sum comes from wgmma (e4m3 products are
// exact in f32; the tensor cores add them with less than f32 precision) and is added into an
// f32 total on the CUDA cores, so long K keeps f32 accumulation. bf16 sums stay in the tensor
// cores' f32 accumulators over all of K.
// Either way a row's result depends only on its own operands: not on the rest of its tile or of
// the batch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda_common.cuh"
#include "ops/moe_experts.h"

namespace inflight {

// Rows of a tile: two warpgroups of 64.
constexpr int32_t kMoeWgmmaTileRows = 128;

// Tile `tile` of a table of tiles of kRows rows (either grouped GEMM's): its expert, its first
// pair row and how many of its rows hold pairs.
struct MoeTile {
  int32_t expert;
  int32_t row0;
  int32_t rows;
};
template <int kRows>
__device__ __forceinline__ MoeTile moe_tile(const MoeTileTable& t, int32_t tile) {
  const int32_t expert = t.tile_expert[tile], row0 = t.tile_start[tile];
  return {expert, row0, min(kRows, t.expert_offsets[expert + 1] - row0)};
}

// The tiles `pairs` rows routed to `experts` experts most likely fill: each expert's rows / 128
// and on average half a tile more, one at least for each expert used.
inline int64_t moe_expected_tiles(int64_t pairs, int64_t experts) {
  const int64_t half_more =
      (pairs + experts * kMoeWgmmaTileRows / 2 + kMoeWgmmaTileRows - 1) / kMoeWgmmaTileRows;
  return pairs < experts ? pairs : half_more > experts ? half_more : experts;
}

struct MoeWgmmaGemm {
  const void* a = nullptr;          // [*, k]: bf16, or e4m3 (fp8)
  const float* a_scales = nullptr;  // fp8: one per row of a
  int64_t rows = 0;                 // of a, contiguous (>= every tile's pairs)
  const void* w = nullptr;          // [E, n, k]: bf16, or e4m3 (fp8) with `scales`
  int64_t experts = 0;              // E
  MoeWeightScales scales;
  cuda::bf16* y = nullptr;  // [pairs, n]
  MoeTileTable tiles;       // of the align step, tiles of kMoeWgmmaTileRows rows
  // What the routing most likely gives (0: unknown), for the choice of tile width: the rows
  // (pairs) of all tiles, and the tiles they fill.
  int64_t expected_rows = 0;
  int64_t expected_tiles = 0;
  int64_t n = 0;
  int64_t k = 0;
  bool fp8 = false;  // a and w e4m3 (W8A8); else both bf16
};

// Whether the kernel takes the product on this device: sm_90 (the sm_90a code), rows of a
// multiple of 16 bytes, n even, a and w 16-byte aligned, rows and experts set, and (fp8) scales
// of one of the layouts above (blocks of 128 columns and a multiple of 128 rows, with n a
// multiple of 128).
bool moe_wgmma_gemm_fits(const MoeWgmmaGemm& g);

// Persistent: at most one CTA an SM (max_tiles bounds the work items there may be), the tiles up
// to *num_tiles.
void moe_wgmma_gemm_cuda(const MoeWgmmaGemm& g, int64_t max_tiles, cudaStream_t stream);

}  // namespace inflight
