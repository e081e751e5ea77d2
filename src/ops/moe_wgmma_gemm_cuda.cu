// The grouped expert GEMM on wgmma (ops/moe_wgmma_gemm.cuh), sm_90a.
//
// A block computes one tile's 128 rows x kCols columns: two warpgroups, each 64 rows with wgmma
// m64nNk32 (e4m3) or m64nNk16 (bf16), f32 accumulators. K advances 128 bytes at a time (128
// e4m3 or 64 bf16 values) through a kStages-deep cp.async ring; every thread copies 16-byte
// chunks of 4 rows of the a tile (gathered through a_rows) and kCols / 32 rows of the weight
// tile per stage, zero-filled past the group's rows, past n and past k. Shared tiles are
// [rows][128 B] with the 128-byte swizzle (chunk c of row r at chunk c ^ (r % 8); bases
// 1024-byte aligned), as the wgmma descriptors read them: start +32 B per k step, SBO 1024 B.
// W8A8: each K block's wgmma sums land in `part`, which the CUDA cores add into the f32 `total`
// (times the block's weight scale where scales are blocks) before the next block; the epilogue
// scales by the row's (and the weight row's) scale. bf16: the wgmmas accumulate into `total`.
//
// Tile columns: what bounds the kernel is L2 bandwidth. A 128 x 128 e4m3 tile brings 32 KB from
// L2 per K block for 4.2 MFLOP; at ~4 TB/s from L2 that is ~520 TFLOP/s, what a Mixtral prefill
// chunk measured. So e4m3 tiles are 192 columns (40 KB for 6.3 MFLOP; part and total take 192
// registers a thread), 128 where the weight scales are 128 x 128 blocks (one block scale per
// tile and K block); bf16 tiles, without `part`, are 256 columns.
//
// At decode the bound is another one: a few tiles (one per expert), each block streaming its
// tiles' bytes once, one block per SM. There 192 columns can leave the last wave of blocks mostly
// idle (Mixtral's down at 256 sequences: 8 tiles x 22 column blocks on 132 SMs, two waves for
// 1.3 waves of work; 255 us, against 206 in tiles of 128 columns, H100), so fp8_tile_cols
// weighs both widths by waves x bytes a block reads per K block (a's filled rows and the
// weight's columns), and takes 128 columns only where that is 10% less
// (INFLIGHT_MOE_FP8_TILE_COLS=128 or 192 forces one, for comparisons).
#include <algorithm>
#include <cstdlib>

#include "ops/attention_mma.cuh"
#include "ops/moe_wgmma_gemm.cuh"

namespace inflight {

namespace {

namespace at = inflight::attention;

constexpr int kRows = kMoeWgmmaTileRows;  // 128: two warpgroups of 64
constexpr int kBlockK = 128;              // bytes; one K block of the e4m3 scales
constexpr int kStages = 4;
constexpr int kThreads = 256;
constexpr int kATileBytes = kRows * kBlockK;

template <int kCols>  // 128 or 192 (e4m3), 256 (bf16)
struct Shape {
  static constexpr int kWTileBytes = kCols * kBlockK;
  static constexpr int kStageBytes = kATileBytes + kWTileBytes;
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + the 1024-byte alignment
  static constexpr int kAccum = kCols / 2;                         // f32 per thread and tile
};

__device__ __forceinline__ const float* weight_scales_of_row(const MoeWeightScales& s,
                                                             int64_t row) {
  return s.s + static_cast<uint32_t>(row) / static_cast<uint32_t>(s.rows_per) * s.stride;
}

// Blocks run through groups of kGroupTiles tiles, column block by column block inside a group:
// the blocks resident at once share a few a tiles (read from DRAM once, then from L2 for every
// column block) and each weight tile (the tiles of a group mostly belong to one expert). Row
// by row over all tiles instead, a prefill chunk's a (16,384 rows x 14,336 for Mixtral's down)
// would stream from DRAM once per column block.
constexpr int64_t kGroupTiles = 8;

// The block's tile: rows row0.. (the first `rows` hold pairs) and columns n0.. of the expert
// whose weight rows start at w_row0.
struct TileOf {
  int32_t row0, rows;
  int64_t n0, w_row0;  // w_row0: in the stack [E n, k]
};

// False: the block's tile is past *num_tiles (it has nothing to do).
template <int kCols>
__device__ __forceinline__ bool tile_of_block(const MoeWgmmaGemm& g, int64_t max_tiles,
                                              int64_t col_blocks, TileOf& t) {
  const int64_t block = blockIdx.x, group_blocks = kGroupTiles * col_blocks;
  const int64_t first_tile = block / group_blocks * kGroupTiles;
  const int64_t group_tiles = min(kGroupTiles, max_tiles - first_tile);
  const int64_t in_group = block % group_blocks;
  const auto tile = static_cast<int32_t>(first_tile + in_group % group_tiles);
  if (tile >= *g.tiles.num_tiles) return false;
  const MoeTile m = moe_tile<kRows>(g.tiles, tile);
  t.row0 = m.row0;
  t.rows = m.rows;
  t.n0 = in_group / group_tiles * kCols;
  t.w_row0 = static_cast<int64_t>(m.expert) * g.n;
  return true;
}

// One thread's cp.async copies of kCopyRows rows (first_row + 32 i) of a tile, column chunk
// tid % 8, into the 128-byte-swizzled layout; rows out of range are zero-filled, as is
// everything past k.
template <int kCopyRows>
struct RowCopier {
  const uint8_t* src[kCopyRows];
  uint32_t dst[kCopyRows];
  uint32_t in_range = 0;  // bit i: row i has data
  int chunk = 0;

  __device__ __forceinline__ void copy(const uint8_t* fallback, int64_t k, int64_t kb,
                                       uint32_t tile) const {
    const int64_t k0 = kb * kBlockK;
    const bool k_ok = k0 + chunk * 16 < k;
#pragma unroll
    for (int i = 0; i < kCopyRows; ++i) {
      const bool valid = (in_range >> i & 1u) != 0 && k_ok;
      at::cp_async_16(tile + dst[i], valid ? src[i] + k0 : fallback, valid);
    }
  }
};

template <int kCopyRows>
__device__ __forceinline__ void set_row(RowCopier<kCopyRows>& c, int i, int r, bool valid,
                                        const uint8_t* row) {
  c.in_range |= static_cast<uint32_t>(valid) << i;
  c.src[i] = row + c.chunk * 16;
  c.dst[i] = static_cast<uint32_t>(r * kBlockK + ((c.chunk ^ (r % 8)) << 4));
}

// kFp8: e4m3 operands (W8A8), else bf16.
template <bool kFp8, int kCols>
__global__ void __launch_bounds__(kThreads, 1)
    moe_wgmma_gemm_kernel(MoeWgmmaGemm g, int64_t max_tiles, int64_t col_blocks) {
  // Compiled for every target; outside sm_90a the wgmmas trap (moe_wgmma_gemm_fits keeps it off).
  using S = Shape<kCols>;
  const int64_t row_bytes = g.k * (kFp8 ? 1 : 2);
  const auto* a = static_cast<const uint8_t*>(g.a);
  const auto* w = static_cast<const uint8_t*>(g.w);
  TileOf t;
  if (!tile_of_block<kCols>(g, max_tiles, col_blocks, t)) return;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t smem_base = at::smem_addr(smem_raw) + 1023u & ~1023u;
  const auto slot = [&](int64_t kb) {
    return smem_base + static_cast<uint32_t>(kb % kStages) * S::kStageBytes;
  };

  // Copies: rows tid / 8 + 32 i of the a tile (gathered through a_rows) and of the weight tile.
  const int tid = static_cast<int>(threadIdx.x);
  RowCopier<kRows / 32> a_copy;
  RowCopier<kCols / 32> w_copy;
  a_copy.chunk = w_copy.chunk = tid % 8;
#pragma unroll
  for (int i = 0; i < kRows / 32; ++i) {
    const int r = tid / 8 + 32 * i;
    const bool in = r < t.rows;
    const int64_t a_row = !in                   ? 0
                          : g.a_rows != nullptr ? g.a_rows[t.row0 + r] / g.a_div
                                                : static_cast<int64_t>(t.row0 + r);
    set_row(a_copy, i, r, in, a + a_row * row_bytes);
  }
#pragma unroll
  for (int i = 0; i < kCols / 32; ++i) {
    const int r = tid / 8 + 32 * i;
    const bool in = t.n0 + r < g.n;
    set_row(w_copy, i, r, in, w + (t.w_row0 + (in ? t.n0 + r : 0)) * row_bytes);
  }
  const auto copy = [&](int64_t kb) {
    a_copy.copy(a, row_bytes, kb, slot(kb));
    w_copy.copy(w, row_bytes, kb, slot(kb) + kATileBytes);
  };

  // Block scales: one per (128-row block, K block), the same for the tile's 128 weight rows.
  const float* block_scales =
      kFp8 && g.scales.cols_per > 0 ? weight_scales_of_row(g.scales, t.w_row0 + t.n0) : nullptr;
  const int wg = tid / 128;  // this warpgroup's 64 rows: 64 wg..
  constexpr uint32_t kDescHi = at::wgmma_desc_hi(1024);
  float total[S::kAccum], part[kFp8 ? S::kAccum : 1];
#pragma unroll
  for (int i = 0; i < S::kAccum; ++i) total[i] = 0.0f;

  const int64_t k_blocks = (row_bytes + kBlockK - 1) / kBlockK;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_blocks) copy(s);
    at::cp_async_commit();
  }
  for (int64_t kb = 0; kb < k_blocks; ++kb) {
    at::cp_async_wait<kStages - 2>();
    at::fence_proxy_async();
    // Block kb has landed for every thread, and every warpgroup is done with block kb - 1
    // (its wgmmas were waited for): the ring slot of kb - 1 takes block kb + kStages - 1.
    __syncthreads();
    if (kb + kStages - 1 < k_blocks) copy(kb + kStages - 1);
    at::cp_async_commit();

    const uint32_t a_lo = at::wgmma_desc_lo(slot(kb) + wg * 64 * kBlockK, 0);
    const uint32_t w_lo = at::wgmma_desc_lo(slot(kb) + kATileBytes, 0);
    at::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockK / 32; ++kk) {  // +32 bytes (2 in 16-byte units) per k step
      const uint64_t a_desc = at::wgmma_desc_join(a_lo + 2 * kk, kDescHi);
      const uint64_t w_desc = at::wgmma_desc_join(w_lo + 2 * kk, kDescHi);
      if constexpr (!kFp8) {
        at::wgmma_m64n256k16_bf16_ss(total, a_desc, w_desc, true);
      } else if constexpr (kCols == 128) {
        at::wgmma_m64n128k32_e4m3_ss(part, a_desc, w_desc, kk > 0);
      } else {
        at::wgmma_m64n192k32_e4m3_ss(part, a_desc, w_desc, kk > 0);
      }
    }
    at::wgmma_commit();
    at::wgmma_wait<0>();
    if constexpr (kFp8) {
      at::fence_registers(part);
      const float f = block_scales != nullptr ? block_scales[kb] : 1.0f;
#pragma unroll
      for (int i = 0; i < S::kAccum; ++i) total[i] += part[i] * f;
    } else {
      at::fence_registers(total);
    }
  }

  // Epilogue: warp w of the warpgroup holds rows 16 w + lane / 4 (+ 8), columns 8 j + 2 (lane % 4)
  // (+ 1) of n8 tile j in total[4 j ..]; scaled by the row's scale (and the weight row's).
  const int warp = (tid % 128) / 32, lane = tid % 32;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = wg * 64 + warp * 16 + lane / 4 + 8 * half;
    if (r >= t.rows) continue;
    const int32_t row = t.row0 + r;
    const int64_t a_row = g.a_rows != nullptr ? g.a_rows[row] / g.a_div : row;
    const float sa = kFp8 ? g.a_scales[a_row] : 1.0f;
    cuda::bf16* y = g.y + static_cast<int64_t>(row) * g.n;
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
      const int64_t col = t.n0 + 8 * j + 2 * (lane % 4);
      if (col >= g.n) continue;  // n is even: col + 1 < n too
      float s0 = sa, s1 = sa;
      if (kFp8 && block_scales == nullptr) {
        s0 *= weight_scales_of_row(g.scales, t.w_row0 + col)[0];
        s1 *= weight_scales_of_row(g.scales, t.w_row0 + col + 1)[0];
      }
      *reinterpret_cast<__nv_bfloat162*>(y + col) =
          __floats2bfloat162_rn(total[4 * j + 2 * half] * s0, total[4 * j + 2 * half + 1] * s1);
    }
  }
}

template <bool kFp8, int kCols>
void launch(const MoeWgmmaGemm& g, int64_t max_tiles, cudaStream_t stream) {
  constexpr auto kKernel = moe_wgmma_gemm_kernel<kFp8, kCols>;
  constexpr int kSmem = Shape<kCols>::kSmemBytes;
  const int64_t col_blocks = (g.n + kCols - 1) / kCols;
  INFLIGHT_CHECK(max_tiles * col_blocks <= cuda::kMaxGridX,
                 "moe_wgmma_gemm: {} tiles x {} columns exceed the grid", max_tiles, g.n);
  cuda::allow_dynamic_smem<kKernel, kSmem>();
  const auto blocks = static_cast<unsigned>(max_tiles * col_blocks);
  kKernel<<<blocks, kThreads, kSmem, stream>>>(g, max_tiles, col_blocks);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

// Tile columns of an e4m3 product with a scale per weight row: 192 (more FLOP per byte from L2,
// what prefill is bound by), unless blocks of 128 columns take 10% less by the count above.
int fp8_tile_cols(const MoeWgmmaGemm& g, int64_t max_tiles) {
  static const int forced = [] {
    const char* v = std::getenv("INFLIGHT_MOE_FP8_TILE_COLS");
    return v != nullptr ? std::atoi(v) : 0;
  }();
  if (forced == 128 || forced == 192) return forced;
  const int64_t tiles = g.expected_tiles > 0 ? g.expected_tiles : max_tiles;
  const int64_t rows =
      g.expected_rows > 0 ? std::min<int64_t>(kRows, g.expected_rows / tiles) : kRows;
  const int64_t sms = cuda::num_sms();
  const auto cost = [&](int64_t cols) {
    const int64_t blocks = tiles * ((g.n + cols - 1) / cols);
    return static_cast<double>((blocks + sms - 1) / sms * (rows + cols));
  };
  return cost(128) <= 0.9 * cost(192) ? 128 : 192;
}

}  // namespace

bool moe_wgmma_gemm_fits(const MoeWgmmaGemm& g) {
  const MoeWeightScales& s = g.scales;
  const bool scales_fit = !g.fp8 || s.cols_per == 0 ||
                          (s.cols_per == kBlockK && s.rows_per % 128 == 0 && g.n % 128 == 0);
  return cuda::compute_capability_major() == 9 && g.k * (g.fp8 ? 1 : 2) % 16 == 0 && g.n % 2 == 0 &&
         scales_fit && cuda::aligned(g.a, 16) && cuda::aligned(g.w, 16);
}

void moe_wgmma_gemm_cuda(const MoeWgmmaGemm& g, int64_t max_tiles, cudaStream_t stream) {
  if (max_tiles == 0) return;
  if (!g.fp8) {
    launch<false, 256>(g, max_tiles, stream);
  } else if (g.scales.cols_per > 0 || fp8_tile_cols(g, max_tiles) == 128) {
    launch<true, 128>(g, max_tiles, stream);
  } else {
    launch<true, 192>(g, max_tiles, stream);
  }
}

}  // namespace inflight
