// The grouped expert GEMM (ops/moe_wgmma_gemm.cuh) on wgmma with its operands brought by TMA,
// sm_90a: W8A8 (e4m3 operands, tiles of 128 or 192 columns) and bf16 (256 columns).
//
// Work items are (tile, column block): 128 rows x kCols columns of one expert's product. A
// cluster of 2 CTAs takes two adjacent column blocks of one tile (the same a rows), one CTA an
// SM, persistent: cluster c takes items c, c + clusters, ... in the order of groups of
// kGroupTiles tiles, column block by column block inside a group (the a tiles of a group stay in
// L2 across its column blocks, and a group's tiles mostly share one expert's weight tile).
//
// Each CTA is three warpgroups:
//   - the producer (warpgroup 0, its registers given to the others): one thread walks the
//     CTA's items and their K blocks of 128 bytes, and per K block waits for a free slot of the
//     kStages ring (`empty`), announces its bytes on `full` and issues two TMA copies: its half
//     of the a tile, multicast into both CTAs of the cluster, and the weight tile of its columns.
//     It runs ahead into the next item while the consumers store the last one;
//   - two consumers (warpgroups 1 and 2, rows 0-63 and 64-127 of the tile): per K block, wait
//     on full, four wgmmas (m64nNk32 e4m3 or m64n256k16 bf16), wait for them, free the slot in
//     both CTAs (the partner's producer writes into it too). W8A8: the wgmmas sum into `part`,
//     which is added (times the K block's weight scale where scales are 128 x 128 blocks) into
//     the f32 `total`, and the epilogue is y = bf16(sa[row] * sw[col] * total) (sw = 1 with
//     block scales); bf16: the wgmmas accumulate into `total` over all of K, y = bf16(total).
// The sums are those of the cp.async kernel this replaced, bit for bit: the same wgmmas in the
// same order (W8A8: part added into total once per 128-byte K block).
//
// a must be contiguous rows (TMA has no gather on sm_90): the down product's act rows, and for
// gate/up x's rows in pair order (W8A8: quantize_fp8 with x_rows; bf16: gathered into the
// workspace's expert_out, free until the down product). Rows of a tile past its
// pairs are the next expert's (or zeros past the tensor): computed, never stored; so are the
// columns past n of the last column block, and K past k (zeros).
//
// Measured against the cp.async kernel it replaced (dev/cuda/moe/README.md, Mixtral-8x7B): W8A8
// on an H100, a prefill chunk of 8,192 tokens gate/up 6.26 -> 4.48 ms, down 2.28 -> 1.80 ms, a
// decode step of 1,024 sequences 1.05 -> 0.75 and 0.43 -> 0.32 ms; bf16 on an H200, the prefill
// chunk 8.93 -> 7.08 and 3.38 -> 3.01 ms.
#include <algorithm>
#include <cstdlib>

#include "ops/attention_mma.cuh"
#include "ops/moe_wgmma_gemm.cuh"
#include "ops/tma.cuh"

namespace inflight {

namespace {

namespace at = inflight::attention;
namespace tma = cuda::tma;

constexpr int kRows = kMoeWgmmaTileRows;  // 128: two consumer warpgroups of 64
constexpr int kBlockK = 128;              // bytes per K block (128 e4m3 or 64 bf16 values)
constexpr int kThreads = 384;             // producer + 2 consumer warpgroups
constexpr int kCluster = 2;               // column blocks sharing their a tile
constexpr int kConsumerWarps = 8;
constexpr int64_t kGroupTiles = 8;

template <int kCols>  // 128 or 192 (e4m3), 256 (bf16)
struct Shape {
  static constexpr int kStages = kCols == 128 ? 6 : kCols == 192 ? 5 : 4;
  static constexpr int kABytes = kRows * kBlockK;
  static constexpr int kWBytes = kCols * kBlockK;
  static constexpr int kStageBytes = kABytes + kWBytes;
  // The ring (1024-byte aligned for the swizzle), then full[kStages] and empty[kStages].
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024 + 2 * kStages * 8;
  static constexpr int kAccum = kCols / 2;  // f32 per thread: 64 rows x kCols / 128 threads
};

struct Item {
  MoeTile m;
  int64_t n0;      // first column
  int64_t w_row0;  // the expert's first row in the stack [E n, k]
};

template <int kCols>
__device__ __forceinline__ Item item_of(const MoeWgmmaGemm& g, int64_t w, int64_t num_tiles,
                                        int64_t col_pairs, uint32_t rank) {
  const int64_t group_items = kGroupTiles * col_pairs;
  const int64_t first_tile = w / group_items * kGroupTiles;
  const int64_t group_tiles = min(kGroupTiles, num_tiles - first_tile);
  const int64_t in_group = w % group_items;
  Item it;
  it.m = moe_tile<kRows>(g.tiles, static_cast<int32_t>(first_tile + in_group % group_tiles));
  it.n0 = (in_group / group_tiles * kCluster + rank) * kCols;
  it.w_row0 = static_cast<int64_t>(it.m.expert) * g.n;
  return it;
}

template <bool kFp8, int kCols>
__global__ void __launch_bounds__(kThreads, 1)
    moe_wgmma_gemm_kernel(const __grid_constant__ CUtensorMap a_map,
                          const __grid_constant__ CUtensorMap w_map, MoeWgmmaGemm g,
                          int64_t col_pairs) {
  using S = Shape<kCols>;
  constexpr int kStages = S::kStages;
  const uint32_t rank = tma::cluster_rank();
  const int64_t num_tiles = *g.tiles.num_tiles;
  const int64_t items = num_tiles * col_pairs;
  const int64_t first = blockIdx.x / kCluster, stride = gridDim.x / kCluster;
  const bool block_scaled = kFp8 && g.scales.cols_per > 0;

  extern __shared__ uint8_t smem_raw[];
  const uint32_t ring = at::smem_addr(smem_raw) + 1023u & ~1023u;
  const uint32_t bars = ring + kStages * S::kStageBytes;
  const auto slot = [&](uint32_t s) { return ring + s * S::kStageBytes; };
  const auto full = [&](uint32_t s) { return bars + 8u * s; };
  const auto empty = [&](uint32_t s) { return bars + 8u * (kStages + s); };
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) {
    for (uint32_t s = 0; s < kStages; ++s) {
      tma::mbar_init(full(s), 1);
      tma::mbar_init(empty(s), kConsumerWarps * kCluster);
    }
    tma::fence_mbar_init();
  }
  tma::cluster_sync();

  const int64_t k_blocks = (g.k * (kFp8 ? 1 : 2) + kBlockK - 1) / kBlockK;
  const int wg = tid / 128;
  if (wg == 0) {
    tma::regs_down<40>();
    if (tid == 0) {
      uint32_t n = 0;  // K blocks issued over all items: slot n % kStages, use n / kStages
      for (int64_t w = first; w < items; w += stride) {
        const Item it = item_of<kCols>(g, w, num_tiles, col_pairs, rank);
        constexpr int kShare = kRows / kCluster;
        const int32_t a_row = it.m.row0 + static_cast<int32_t>(rank) * kShare;
        const auto w_row = static_cast<int32_t>(it.w_row0 + it.n0);
        for (int64_t kb = 0; kb < k_blocks; ++kb, ++n) {
          const uint32_t s = n % kStages;
          tma::mbar_wait(empty(s), (n / kStages & 1u) ^ 1u);
          tma::mbar_expect_tx(full(s), S::kStageBytes);
          const auto k0 = static_cast<int32_t>(kb * kBlockK);
          tma::load_2d_multicast(slot(s) + rank * kShare * kBlockK, &a_map, full(s), k0, a_row,
                                 (1u << kCluster) - 1);
          tma::load_2d(slot(s) + S::kABytes, &w_map, full(s), k0, w_row);
        }
      }
    }
    __syncwarp();
  } else {
    tma::regs_up<232>();
    const int consumer = wg - 1;  // rows 64 consumer ..
    const int warp = (tid % 128) / 32, lane = tid % 32;
    constexpr uint32_t kDescHi = at::wgmma_desc_hi(1024);
    float total[S::kAccum], part[kFp8 ? S::kAccum : 1];
    uint32_t n = 0;
    for (int64_t w = first; w < items; w += stride) {
      const Item it = item_of<kCols>(g, w, num_tiles, col_pairs, rank);
      // Block scales: one per (128-row block, K block), the same for the tile's 128 weight rows.
      const float* block_scales =
          block_scaled ? g.scales.s + (it.w_row0 + it.n0) / g.scales.rows_per * g.scales.stride
                       : nullptr;
#pragma unroll
      for (int i = 0; i < S::kAccum; ++i) total[i] = 0.0f;
      for (int64_t kb = 0; kb < k_blocks; ++kb, ++n) {
        const uint32_t s = n % kStages;
        tma::mbar_wait(full(s), n / kStages & 1u);
        const uint32_t a_lo = at::wgmma_desc_lo(slot(s) + consumer * 64 * kBlockK, 0);
        const uint32_t w_lo = at::wgmma_desc_lo(slot(s) + S::kABytes, 0);
        at::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBlockK / 32; ++kk) {  // +32 bytes (2 in 16-byte units) a k step
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
        } else {
          at::fence_registers(total);
        }
        if (lane == 0) {
#pragma unroll
          for (uint32_t c = 0; c < kCluster; ++c) tma::mbar_arrive_cluster(empty(s), c);
        }
        if constexpr (kFp8) {
          const float f = block_scales != nullptr ? block_scales[kb] : 1.0f;
#pragma unroll
          for (int i = 0; i < S::kAccum; ++i) total[i] += part[i] * f;
        }
      }

      // Epilogue: warp `warp` of the warpgroup holds rows 16 warp + lane / 4 (+ 8), columns
      // 8 j + 2 (lane % 4) (+ 1) of n8 tile j in total[4 j ..].
      const int r0 = consumer * 64 + warp * 16 + lane / 4, r1 = r0 + 8;
      const float sa0 = !kFp8 ? 1.0f : r0 < it.m.rows ? g.a_scales[it.m.row0 + r0] : 0.0f;
      const float sa1 = !kFp8 ? 1.0f : r1 < it.m.rows ? g.a_scales[it.m.row0 + r1] : 0.0f;
      cuda::bf16* y0 = g.y + static_cast<int64_t>(it.m.row0 + r0) * g.n;
      cuda::bf16* y1 = y0 + 8 * g.n;
      const auto row_scale = [&](int64_t col) {
        if (!kFp8 || block_scaled) return 1.0f;
        const int64_t row = it.w_row0 + col;
        return g.scales
            .s[(g.scales.rows_per == 1 ? row : row / g.scales.rows_per) * g.scales.stride];
      };
#pragma unroll
      for (int j = 0; j < kCols / 8; ++j) {
        const int64_t col = it.n0 + 8 * j + 2 * (lane % 4);
        if (col >= g.n) continue;  // n is even: col + 1 < n too
        const float w0 = row_scale(col), w1 = row_scale(col + 1);
        if (r0 < it.m.rows) {
          *reinterpret_cast<__nv_bfloat162*>(y0 + col) =
              __floats2bfloat162_rn(total[4 * j] * (sa0 * w0), total[4 * j + 1] * (sa0 * w1));
        }
        if (r1 < it.m.rows) {
          *reinterpret_cast<__nv_bfloat162*>(y1 + col) =
              __floats2bfloat162_rn(total[4 * j + 2] * (sa1 * w0), total[4 * j + 3] * (sa1 * w1));
        }
      }
    }
  }
  // No CTA leaves while its partner may still write into its ring or arrive on its barriers.
  tma::cluster_sync();
}

template <bool kFp8, int kCols>
void launch(const MoeWgmmaGemm& g, int64_t max_tiles, cudaStream_t stream) {
  using S = Shape<kCols>;
  constexpr auto kKernel = moe_wgmma_gemm_kernel<kFp8, kCols>;
  const int64_t row_bytes = g.k * (kFp8 ? 1 : 2);
  const CUtensorMap a_map = tma::map_2d_bytes(g.a, g.rows, row_bytes, kRows / kCluster);
  const CUtensorMap w_map = tma::map_2d_bytes(g.w, g.experts * g.n, row_bytes, kCols);
  const int64_t col_pairs = (g.n + kCols * kCluster - 1) / (kCols * kCluster);
  const int64_t clusters =
      std::min<int64_t>(max_tiles * col_pairs, std::max(cuda::num_sms() / kCluster, 1));
  cuda::allow_dynamic_smem<kKernel, S::kSmemBytes>();
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(clusters * kCluster));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = S::kSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = kCluster;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  INFLIGHT_CUDA_CHECK(cudaLaunchKernelEx(&config, kKernel, a_map, w_map, g, col_pairs));
}

// Tile columns: 192 (more products per byte brought in, what prefill is bound by), unless tiles
// of 128 columns take 10% less by waves x bytes an item reads per K block (decode steps, whose
// few tiles leave the last wave of 192-column items mostly idle); 128 where the weight scales
// are 128 x 128 blocks. INFLIGHT_MOE_FP8_TILE_COLS=128 or 192 forces one, for comparisons.
int tile_cols(const MoeWgmmaGemm& g, int64_t max_tiles) {
  static const int forced = [] {
    const char* v = std::getenv("INFLIGHT_MOE_FP8_TILE_COLS");
    return v != nullptr ? std::atoi(v) : 0;
  }();
  if (g.scales.cols_per > 0) return 128;
  if (forced == 128 || forced == 192) return forced;
  const int64_t tiles = g.expected_tiles > 0 ? g.expected_tiles : max_tiles;
  const int64_t rows =
      g.expected_rows > 0 ? std::min<int64_t>(kRows, g.expected_rows / tiles) : kRows;
  const int64_t sms = cuda::num_sms();
  const auto cost = [&](int64_t cols) {
    const int64_t items = tiles * ((g.n + cols - 1) / cols);
    return static_cast<double>((items + sms - 1) / sms * (rows + cols));
  };
  return cost(128) <= 0.9 * cost(192) ? 128 : 192;
}

}  // namespace

bool moe_wgmma_gemm_fits(const MoeWgmmaGemm& g) {
  const MoeWeightScales& s = g.scales;
  const bool scales_fit = !g.fp8 || s.cols_per == 0 ||
                          (s.cols_per == kBlockK && s.rows_per % 128 == 0 && g.n % 128 == 0);
  return cuda::compute_capability_major() == 9 && g.k * (g.fp8 ? 1 : 2) % 16 == 0 && g.n % 2 == 0 &&
         g.rows > 0 && g.experts > 0 && scales_fit && cuda::aligned(g.a, 16) &&
         cuda::aligned(g.w, 16);
}

void moe_wgmma_gemm_cuda(const MoeWgmmaGemm& g, int64_t max_tiles, cudaStream_t stream) {
  INFLIGHT_CHECK(g.rows > 0 && g.experts > 0,
                 "moe_wgmma_gemm_cuda: needs the rows of a and the experts of w");
  if (max_tiles == 0) return;
  if (!g.fp8) {
    launch<false, 256>(g, max_tiles, stream);
  } else if (tile_cols(g, max_tiles) == 128) {
    launch<true, 128>(g, max_tiles, stream);
  } else {
    launch<true, 192>(g, max_tiles, stream);
  }
}

}  // namespace inflight
