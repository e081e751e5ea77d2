// The W8A8 grouped expert GEMM (ops/moe_w8a8_gemm.cuh) on sm_90a wgmma.
//
// A block computes one tile's 128 rows x 128 columns: two warpgroups, each 64 rows with
// wgmma m64n128k32 (e4m3 x e4m3 -> f32). K advances 128 bytes at a time through a kStages-deep
// cp.async ring; every thread copies 4 16-byte chunks of the a tile (rows gathered through
// a_rows) and 4 of the weight tile per stage, zero-filled past the group's rows, past n and
// past k. Shared tiles are [128 rows][128 B] with the 128-byte swizzle (chunk c of row r at
// chunk c ^ (r % 8); bases 1024-byte aligned), as the wgmma descriptors read them: start +32 B
// per k32 step, SBO 1024 B. Each K block's wgmma sums land in `part`, which the CUDA cores add
// into the f32 `total` (times the block's weight scale where scales are blocks) before the
// next block; the epilogue scales by the row's (and the weight row's) scale and stores bf16.
#include "ops/attention_mma.cuh"
#include "ops/moe_w8a8_gemm.cuh"

namespace inflight {

namespace {

namespace at = inflight::attention;

constexpr int kRows = kMoeW8a8TileRows;  // 128
constexpr int kCols = 128;
constexpr int kBlockK = 128;  // bytes = e4m3 values; one K block of the scales
constexpr int kThreads = 256;
constexpr int kTileBytes = kRows * kBlockK;  // a and w tiles alike (kCols == kRows)
constexpr int kStageBytes = 2 * kTileBytes;
constexpr int kStages = 4;
constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + slack for the 1024-byte alignment
[[maybe_unused]] constexpr int kChunksPerThread = kTileBytes / 16 / kThreads;  // 4
static_assert(kCols == kRows, "a and w tiles share the copy layout");

[[maybe_unused]] __device__ __forceinline__ const float* weight_scales_of_row(
    const MoeWeightScales& s, int64_t row) {
  return s.s + static_cast<uint32_t>(row) / static_cast<uint32_t>(s.rows_per) * s.stride;
}

// Blocks run through groups of kGroupTiles tiles, column block by column block inside a group:
// the blocks resident at once share a few a tiles (read from DRAM once, then from L2 for every
// column block) and each weight tile (the tiles of a group mostly belong to one expert). Row
// by row over all tiles instead, a prefill chunk's a (16,384 rows x 14,336 for Mixtral's down)
// would stream from DRAM once per column block.
constexpr int64_t kGroupTiles = 8;

__global__ void __launch_bounds__(kThreads, 1)
    moe_w8a8_gemm_kernel(MoeW8a8Gemm g, int64_t max_tiles, int64_t col_blocks) {
#if INFLIGHT_ATTN_WGMMA
  const int64_t block = blockIdx.x, group_blocks = kGroupTiles * col_blocks;
  const int64_t first_tile = block / group_blocks * kGroupTiles;
  const int64_t group_tiles = min(kGroupTiles, max_tiles - first_tile);
  const int64_t in_group = block % group_blocks;
  const auto tile = static_cast<int32_t>(first_tile + in_group % group_tiles);
  if (tile >= *g.num_tiles) return;
  const int32_t expert = g.tile_expert[tile];
  const int32_t row0 = g.tile_start[tile];
  const int32_t rows = min(kRows, g.expert_offsets[expert + 1] - row0);
  const int64_t n0 = in_group / group_tiles * kCols;
  const int64_t w_row0 = static_cast<int64_t>(expert) * g.n;  // the expert's first row in [E n, k]

  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  const uint32_t smem_base = at::smem_addr(smem);

  // This thread's chunks: column chunk c of rows tid / 8 + 32 i, in a and in w.
  const int tid = static_cast<int>(threadIdx.x);
  const int chunk = tid % 8;
  const uint8_t* a_src[kChunksPerThread];
  const uint8_t* w_src[kChunksPerThread];
  bool a_ok[kChunksPerThread], w_ok[kChunksPerThread];
  uint32_t dst[kChunksPerThread];
#pragma unroll
  for (int i = 0; i < kChunksPerThread; ++i) {
    const int r = tid / 8 + 32 * i;
    a_ok[i] = r < rows;
    const int64_t a_row = !a_ok[i]              ? 0
                          : g.a_rows != nullptr ? g.a_rows[row0 + r] / g.a_div
                                                : static_cast<int64_t>(row0 + r);
    a_src[i] = g.a + a_row * g.k + chunk * 16;
    w_ok[i] = n0 + r < g.n;
    w_src[i] = g.w + (w_row0 + (w_ok[i] ? n0 + r : 0)) * g.k + chunk * 16;
    dst[i] = static_cast<uint32_t>(r * kBlockK + ((chunk ^ (r % 8)) << 4));
  }
  const int64_t k_blocks = (g.k + kBlockK - 1) / kBlockK;
  const auto load = [&](int64_t kb) {
    const int64_t k0 = kb * kBlockK;
    const bool k_ok = k0 + chunk * 16 < g.k;
    const uint32_t a_s = smem_base + static_cast<uint32_t>(kb % kStages) * kStageBytes;
    const uint32_t w_s = a_s + kTileBytes;
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const bool a_valid = a_ok[i] && k_ok, w_valid = w_ok[i] && k_ok;
      at::cp_async_16(a_s + dst[i], a_valid ? a_src[i] + k0 : g.a, a_valid);
      at::cp_async_16(w_s + dst[i], w_valid ? w_src[i] + k0 : g.w, w_valid);
    }
  };

  // Block scales: one per (128-row block, K block), the same for the tile's 128 weight rows.
  const bool block_scales = g.scales.cols_per > 0;
  const float* tile_block_scales =
      block_scales ? weight_scales_of_row(g.scales, w_row0 + n0) : nullptr;

  const int wg = tid / 128;  // this warpgroup's 64 rows: 64 wg..
  constexpr uint32_t kDescHi = at::wgmma_desc_hi(1024);
  float total[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) total[i] = 0.0f;
  // The wgmmas of block kb into `part`, waited for, and added into `total`.
  float part[64];
  const auto multiply = [&](int64_t kb) {
    const uint32_t a_s = smem_base + static_cast<uint32_t>(kb % kStages) * kStageBytes;
    const uint32_t a_lo = at::wgmma_desc_lo(a_s + wg * 64 * kBlockK, 0);
    const uint32_t w_lo = at::wgmma_desc_lo(a_s + kTileBytes, 0);
    at::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockK / 32; ++kk) {  // +32 bytes (2 in 16-byte units) per k32
      at::wgmma_m64n128k32_e4m3_ss(part, at::wgmma_desc_join(a_lo + 2 * kk, kDescHi),
                                   at::wgmma_desc_join(w_lo + 2 * kk, kDescHi), kk > 0);
    }
    at::wgmma_commit();
    at::wgmma_wait<0>();
    at::fence_registers(part);
    const float f = block_scales ? tile_block_scales[kb] : 1.0f;
#pragma unroll
    for (int i = 0; i < 64; ++i) total[i] += part[i] * f;
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_blocks) load(s);
    at::cp_async_commit();
  }
  for (int64_t kb = 0; kb < k_blocks; ++kb) {
    at::cp_async_wait<kStages - 2>();
    at::fence_proxy_async();
    // Block kb has landed for every thread, and every warpgroup is done with block kb - 1
    // (its wgmmas were waited for): the ring slot of kb - 1 takes block kb + kStages - 1.
    __syncthreads();
    if (kb + kStages - 1 < k_blocks) load(kb + kStages - 1);
    at::cp_async_commit();
    multiply(kb);
  }

  // Epilogue: warp w of the warpgroup holds rows 16 w + lane / 4 (+ 8), columns 8 j + 2 (lane % 4)
  // (+ 1) of n8 tile j in total[4 j ..].
  const int warp = (tid % 128) / 32, lane = tid % 32;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = wg * 64 + warp * 16 + lane / 4 + 8 * half;
    if (r >= rows) continue;
    const int32_t row = row0 + r;
    const int64_t a_row = g.a_rows != nullptr ? g.a_rows[row] / g.a_div : row;
    const float sa = g.a_scales[a_row];
    cuda::bf16* y = g.y + static_cast<int64_t>(row) * g.n;
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
      const int64_t col = n0 + 8 * j + 2 * (lane % 4);
      if (col >= g.n) continue;  // n is even: col + 1 < n too
      float s0 = sa, s1 = sa;
      if (!block_scales) {
        s0 *= weight_scales_of_row(g.scales, w_row0 + col)[0];
        s1 *= weight_scales_of_row(g.scales, w_row0 + col + 1)[0];
      }
      *reinterpret_cast<__nv_bfloat162*>(y + col) =
          __floats2bfloat162_rn(total[4 * j + 2 * half] * s0, total[4 * j + 2 * half + 1] * s1);
    }
  }
#else
  __trap();
#endif
}

}  // namespace

bool moe_w8a8_gemm_fits(const MoeW8a8Gemm& g) {
  const MoeWeightScales& s = g.scales;
  const bool scales_fit =
      s.cols_per == 0 || (s.cols_per == kBlockK && s.rows_per % kCols == 0 && g.n % kCols == 0);
  return cuda::compute_capability_major() == 9 && g.k % 16 == 0 && g.n % 2 == 0 && scales_fit &&
         cuda::aligned(g.a, 16) && cuda::aligned(g.w, 16);
}

void moe_w8a8_gemm_cuda(const MoeW8a8Gemm& g, int64_t max_tiles, cudaStream_t stream) {
  const int64_t col_blocks = (g.n + kCols - 1) / kCols;
  INFLIGHT_CHECK(max_tiles * col_blocks <= cuda::kMaxGridX,
                 "moe_w8a8_gemm: {} tiles x {} columns exceed the grid", max_tiles, g.n);
  if (max_tiles == 0) return;
  const auto blocks = static_cast<unsigned>(max_tiles * col_blocks);
  cuda::allow_dynamic_smem<moe_w8a8_gemm_kernel, kSmemBytes>();
  moe_w8a8_gemm_kernel<<<blocks, kThreads, kSmemBytes, stream>>>(g, max_tiles, col_blocks);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
