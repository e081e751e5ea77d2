// The grouped expert GEMM on wgmma (ops/moe_wgmma_gemm.cuh), sm_90a: bf16 experts here; W8A8
// products go to the TMA kernel (moe_tma_gemm_cuda.cu).
//
// A block computes one tile's 128 rows x 256 columns: two warpgroups, each 64 rows with wgmma
// m64n256k16 bf16, f32 accumulators over all of K. K advances 128 bytes (64 values) at a time
// through a kStages-deep cp.async ring; every thread copies 16-byte chunks of 4 rows of the a
// tile (gathered through a_rows) and 8 rows of the weight tile per stage, zero-filled past the
// group's rows, past n and past k. Shared tiles are [rows][128 B] with the 128-byte swizzle
// (chunk c of row r at chunk c ^ (r % 8); bases 1024-byte aligned), as the wgmma descriptors
// read them: start +32 B per k step, SBO 1024 B.
//
// What bounds it is L2 bandwidth: a 128 x 256 bf16 tile brings 48 KB from L2 per K block for
// 4.2 MFLOP.
#include "ops/attention_mma.cuh"
#include "ops/moe_wgmma_gemm.cuh"

namespace inflight {

namespace {

namespace at = inflight::attention;

constexpr int kRows = kMoeWgmmaTileRows;  // 128: two warpgroups of 64
constexpr int kCols = 256;
constexpr int kBlockK = 128;  // bytes
constexpr int kStages = 4;
constexpr int kThreads = 256;
constexpr int kATileBytes = kRows * kBlockK;
constexpr int kWTileBytes = kCols * kBlockK;
constexpr int kStageBytes = kATileBytes + kWTileBytes;
constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + the 1024-byte alignment
constexpr int kAccum = kCols / 2;                         // f32 per thread and tile

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

__global__ void __launch_bounds__(kThreads, 1)
    moe_wgmma_gemm_kernel(MoeWgmmaGemm g, int64_t max_tiles, int64_t col_blocks) {
  // Compiled for every target; outside sm_90a the wgmmas trap (moe_wgmma_gemm_fits keeps it off).
  const int64_t row_bytes = g.k * 2;
  const auto* a = static_cast<const uint8_t*>(g.a);
  const auto* w = static_cast<const uint8_t*>(g.w);
  TileOf t;
  if (!tile_of_block(g, max_tiles, col_blocks, t)) return;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t smem_base = at::smem_addr(smem_raw) + 1023u & ~1023u;
  const auto slot = [&](int64_t kb) {
    return smem_base + static_cast<uint32_t>(kb % kStages) * kStageBytes;
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

  const int wg = tid / 128;  // this warpgroup's 64 rows: 64 wg..
  constexpr uint32_t kDescHi = at::wgmma_desc_hi(1024);
  float total[kAccum];
#pragma unroll
  for (int i = 0; i < kAccum; ++i) total[i] = 0.0f;

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
      at::wgmma_m64n256k16_bf16_ss(total, a_desc, w_desc, true);
    }
    at::wgmma_commit();
    at::wgmma_wait<0>();
    at::fence_registers(total);
  }

  // Epilogue: warp w of the warpgroup holds rows 16 w + lane / 4 (+ 8), columns 8 j + 2 (lane % 4)
  // (+ 1) of n8 tile j in total[4 j ..].
  const int warp = (tid % 128) / 32, lane = tid % 32;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = wg * 64 + warp * 16 + lane / 4 + 8 * half;
    if (r >= t.rows) continue;
    cuda::bf16* y = g.y + static_cast<int64_t>(t.row0 + r) * g.n;
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
      const int64_t col = t.n0 + 8 * j + 2 * (lane % 4);
      if (col >= g.n) continue;  // n is even: col + 1 < n too
      *reinterpret_cast<__nv_bfloat162*>(y + col) =
          __floats2bfloat162_rn(total[4 * j + 2 * half], total[4 * j + 2 * half + 1]);
    }
  }
}

void launch(const MoeWgmmaGemm& g, int64_t max_tiles, cudaStream_t stream) {
  constexpr auto kKernel = moe_wgmma_gemm_kernel;
  const int64_t col_blocks = (g.n + kCols - 1) / kCols;
  INFLIGHT_CHECK(max_tiles * col_blocks <= cuda::kMaxGridX,
                 "moe_wgmma_gemm: {} tiles x {} columns exceed the grid", max_tiles, g.n);
  cuda::allow_dynamic_smem<kKernel, kSmemBytes>();
  const auto blocks = static_cast<unsigned>(max_tiles * col_blocks);
  kKernel<<<blocks, kThreads, kSmemBytes, stream>>>(g, max_tiles, col_blocks);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool moe_wgmma_gemm_fits(const MoeWgmmaGemm& g) {
  const MoeWeightScales& s = g.scales;
  const bool scales_fit = !g.fp8 || s.cols_per == 0 ||
                          (s.cols_per == kBlockK && s.rows_per % 128 == 0 && g.n % 128 == 0);
  // fp8 (the TMA kernel): a contiguous, and its rows and the experts counted for the tensor maps.
  const bool tma_fits = !g.fp8 || (g.a_rows == nullptr && g.rows > 0 && g.experts > 0);
  return cuda::compute_capability_major() == 9 && g.k * (g.fp8 ? 1 : 2) % 16 == 0 && g.n % 2 == 0 &&
         scales_fit && tma_fits && cuda::aligned(g.a, 16) && cuda::aligned(g.w, 16);
}

void moe_wgmma_gemm_cuda(const MoeWgmmaGemm& g, int64_t max_tiles, cudaStream_t stream) {
  if (max_tiles == 0) return;
  if (g.fp8) {
    moe_tma_gemm_cuda(g, max_tiles, stream);
  } else {
    launch(g, max_tiles, stream);
  }
}

}  // namespace inflight
