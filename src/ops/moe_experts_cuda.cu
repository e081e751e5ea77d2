// moe_experts on CUDA (bf16 in/out, f32 accumulation). Launches that never wait for the host
// (grid sizes follow from T, k and E, known when the step is enqueued). Large batches (and every
// batch in batch-invariant mode) group the pairs by expert:
//
//   1. align    one block: counts pairs per expert, lays the groups out in expert order
//               (expert_offsets), cuts each group into tiles of the GEMM's rows (128 on
//               wgmma; else kMoeTileRows, or twice that where experts average that many:
//               tile_expert, tile_start, num_tiles),
//               and scatters the pairs into their group (sorted_pairs,
//               pair_position). The order of pairs inside a group is whatever the atomics give;
//               nothing below depends on it (every row is computed on its own).
//   2. gate/up  grouped GEMM over the tiles: row r of a tile is x[token of sorted pair r] times
//               its expert's [gate; up] weight -> gate_up [pairs, 2 I], rows in expert order
//   3. swiglu   the dense MLP's kernel over all pairs -> act [pairs, I]
//   4. down     grouped GEMM: act rows times their expert's down weight -> expert_out
//   5. combine  out[t] = sum_j weights[t, j] expert_out[pair_position[t k + j]], j in order
//               (all k rows' columns loaded at once)
//
// The grouped GEMM runs on sm_90 on wgmma (ops/moe_wgmma_gemm.cuh: tiles of 128 rows,
// run_experts_wgmma) where rows are multiples of 16 bytes and the operands 16-byte aligned, as
// every model's are; elsewhere on mma.sync (a cp.async ring, tiles of 32 or 64 rows x 128
// columns) where K is a multiple of 8, and on CUDA cores otherwise (32-row tiles). On each, a
// row's sums run over K in a fixed order: its result does not depend on the rest of the batch
// or on the tile size.
// Grids are sized for the worst case, T k / tile rows + E tiles; tiles past num_tiles exit at
// once.
//
// Small batches (T k <= E pairs, decode; not in batch-invariant mode) skip the grouping: two
// kernels of warp-per-row GEMVs, gate/up with the SwiGLU (rows in pair order into act) and down
// with the weighted sum over a token's k pairs (straight into out). Only the chosen experts'
// weights are read either way; a pair's result then depends on the path its batch size picks,
// as the dense GEMMs' do (cuBLASLt or the GEMV by shape).
//
// FP8 experts (kFp8: e4m3 weights, ops/moe_experts.h): on sm_90, with workspace rows for the
// quantized activations, the grouped path is W8A8 (run_experts_wgmma: x quantized per token,
// the SwiGLU writing e4m3 rows, both products on FP8 tensor cores). Otherwise
// every kernel reads the e4m3 bytes (half the traffic) and makes of each value the bf16 a
// load-time dequantization would, bf16(value * scale), before the same arithmetic in the same
// order: the results are bit for bit those of the dequantized weights. The tensor-core GEMM
// stages e4m3 tiles through its cp.async ring and widens each into one bf16 tile before its
// MMAs.
#include <cuda_fp8.h>

#include <type_traits>

#include "ops/attention_mma.cuh"
#include "ops/cuda_common.cuh"
#include "ops/moe_wgmma_gemm.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

// ---- FP8 weights -------------------------------------------------------------------------------

// The scales of row `row` of a stacked e4m3 weight [E n, k] (MoeWeightScales), and the one of
// its column `col` (32-bit index math: rows and columns are below 2^31).
__device__ __forceinline__ const float* scale_row(const MoeWeightScales& s, int64_t row) {
  return s.s + static_cast<uint32_t>(row) / static_cast<uint32_t>(s.rows_per) * s.stride;
}
__device__ __forceinline__ float scale_at(const float* row_scales, const MoeWeightScales& s,
                                          int64_t col) {
  return row_scales[s.cols_per > 0 ? static_cast<uint32_t>(col) / static_cast<uint32_t>(s.cols_per)
                                   : 0u];
}

// bf16(e4m3 value * scale), the rounding a load-time dequantization makes, widened to f32.
__device__ __forceinline__ float dequant(uint8_t q, float scale) {
  const float v = __half2float(__half(__nv_cvt_fp8_to_halfraw(q, __NV_E4M3)));
  return cuda::to_f32(cuda::to_bf16(v * scale));
}

// 8 e4m3 values (little-endian in a uint2) -> dequant() of each, as 8 packed bf16.
__device__ __forceinline__ uint4 dequant8_bf16(const uint2& q, float scale) {
  const auto* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&q);
  uint4 packed;
  auto* p2 = reinterpret_cast<cuda::bf16x2*>(&packed);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pairs[i], __NV_E4M3)));
    p2[i] = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  }
  return packed;
}

// ---- 1. align ----------------------------------------------------------------------------------

constexpr int kAlignThreads = 1024;

// Groups cut into tiles of `tile_rows` rows (kMoeTileRows, or twice that: see run_experts).
__global__ void __launch_bounds__(kAlignThreads)
    moe_align_kernel(MoeExpertsParams p, int32_t tile_rows) {
  __shared__ int32_t counts[kMoeMaxExperts];
  __shared__ int32_t cursor[kMoeMaxExperts];
  const auto num_experts = static_cast<int32_t>(p.num_experts);
  const int64_t pairs = p.tokens * p.k;
  for (int32_t e = threadIdx.x; e < num_experts; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x) atomicAdd(&counts[p.ids[i]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    // Serial over experts and tiles: E + T k / tile_rows steps at most.
    int32_t offset = 0, tiles = 0;
    for (int32_t e = 0; e < num_experts; ++e) {
      p.expert_offsets[e] = offset;
      cursor[e] = offset;
      for (int32_t s = 0; s < counts[e]; s += tile_rows) {
        p.tile_expert[tiles] = e;
        p.tile_start[tiles] = offset + s;
        ++tiles;
      }
      offset += counts[e];
    }
    p.expert_offsets[num_experts] = offset;
    *p.num_tiles = tiles;
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x) {
    const int32_t position = atomicAdd(&cursor[p.ids[i]], 1);
    p.sorted_pairs[position] = static_cast<int32_t>(i);
    p.pair_position[i] = position;
  }
}

// ---- 2, 4. grouped GEMM ----------------------------------------------------------------------

// y[r, n] = sum_k a[a_row(r), k] w[e(r), n, k] for the rows r of every tile, where a_row(r) =
// a_rows[r] / a_div (gathered: the token of a sorted pair) or r itself (a_rows null).
struct GroupedGemm {
  const bf16* a = nullptr;
  const int32_t* a_rows = nullptr;
  int32_t a_div = 1;
  const void* w = nullptr;  // [E, n, k]: bf16, or e4m3 (kFp8) with `scales`
  MoeWeightScales scales;
  bf16* y = nullptr;  // [pairs, n]
  MoeTileTable tiles;
  int64_t n = 0;
  int64_t k = 0;
};

constexpr int kTileM = static_cast<int>(kMoeTileRows);  // 32

// Tile `tile` (kRows rows), and its rows that hold pairs (-1 past the group's end) as rows of
// a, into a_row.
template <int kRows = kTileM>
__device__ __forceinline__ MoeTile tile_rows(const GroupedGemm& g, int32_t tile, int64_t* a_row) {
  const MoeTile t = moe_tile<kRows>(g.tiles, tile);
  if (threadIdx.x < kRows) {
    const int32_t r = t.row0 + static_cast<int32_t>(threadIdx.x);
    a_row[threadIdx.x] = static_cast<int32_t>(threadIdx.x) >= t.rows ? -1
                         : g.a_rows != nullptr                       ? g.a_rows[r] / g.a_div
                                                                     : r;
  }
  __syncthreads();
  return t;
}

// ---- tensor cores (k % 8 == 0, a and w 16-byte aligned) ---------------------------------------
//
// A block computes a tile's kRows (32 or 64) rows x kTcN columns with mma.sync m16n8k16 (bf16
// in, f32 accumulate; attention_mma.cuh): 4 warps per 32 rows, warp w owning rows
// 32 (w / 4).. + 31 and columns 32 (w % 4)..+31, as 2 (m16) x 4 (n8) tiles. K advances kTcK at a
// time through a kTcStages-deep cp.async ring: the a rows (gathered) and kTcN weight rows,
// 16-byte chunks, zero-filled past n and k. Shared rows are kTcStride bf16 (80 bytes): the
// fragment loads of a warp (rows g, words t: bank 20 g + t mod 32) hit 32 distinct banks. A
// row's sums run over K in the same order whatever else is in its tile and whatever its size:
// 64-row tiles read each weight tile once for twice the rows.
constexpr int kTcN = 128;
constexpr int kTcK = 32;
constexpr int kTcStages = 3;
constexpr int kTcStride = kTcK + 8;
constexpr int kTcChunks = kTcK / 8;  // 16-byte chunks per shared row
template <int kRows>
constexpr int kTcThreads = 4 * kRows;  // 4 warps per 32 rows: one a chunk per thread per stage
static_assert(kTcN == 4 * 32, "a warp owns 32 columns");

__device__ __forceinline__ uint32_t ld_bf16x2(const bf16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// FP8: the ring holds e4m3 tiles (kTcN rows of kTcK bytes), widened each k step into one bf16
// tile (w_s[0]) between two barriers.
template <int kRows, bool kFp8>
__global__ void __launch_bounds__(kTcThreads<kRows>) moe_grouped_gemm_tc_kernel(GroupedGemm g) {
  namespace at = inflight::attention;
  constexpr int kThreads = kTcThreads<kRows>;
  const auto tile = static_cast<int32_t>(blockIdx.x);
  if (tile >= *g.tiles.num_tiles) return;
  __shared__ int64_t a_row[kRows];
  const MoeTile tl = tile_rows<kRows>(g, tile, a_row);
  const int32_t rows = tl.rows, row0 = tl.row0;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kTcN;
  // The expert's first weight row in the stack [E n, k].
  const int64_t w_row0 = static_cast<int64_t>(tl.expert) * g.n;

  __shared__ alignas(16) bf16 a_s[kTcStages][kRows][kTcStride];
  __shared__ alignas(16) bf16 w_s[kFp8 ? 1 : kTcStages][kTcN][kTcStride];
  __shared__ alignas(16) uint8_t w8_s[kFp8 ? kTcStages : 1][kFp8 ? kTcN : 1][kTcK];
  const int64_t k_tiles = (g.k + kTcK - 1) / kTcK;
  const auto load = [&](int64_t kt, int stage) {
    const int64_t k0 = kt * kTcK;
    {
      const int r = static_cast<int>(threadIdx.x) / kTcChunks;
      const int c = static_cast<int>(threadIdx.x) % kTcChunks * 8;
      const int64_t src = a_row[r];
      const bool ok = src >= 0 && k0 + c < g.k;
      at::cp_async_16(at::smem_addr(&a_s[stage][r][c]), ok ? g.a + src * g.k + k0 + c : g.a, ok);
    }
    if constexpr (kFp8) {  // 8-byte chunks of 8 values, as the bf16 tiles' 16-byte ones
      const auto* w = static_cast<const uint8_t*>(g.w) + w_row0 * g.k;
      for (int i = static_cast<int>(threadIdx.x); i < kTcN * kTcChunks; i += kThreads) {
        const int r = i / kTcChunks, c = i % kTcChunks * 8;
        const bool ok = n0 + r < g.n && k0 + c < g.k;
        at::cp_async_small<8>(at::smem_addr(&w8_s[stage][r][c]),
                              ok ? w + (n0 + r) * g.k + k0 + c : w, ok);
      }
    } else {
      const bf16* w = static_cast<const bf16*>(g.w) + w_row0 * g.k;
      for (int i = static_cast<int>(threadIdx.x); i < kTcN * kTcChunks; i += kThreads) {
        const int r = i / kTcChunks, c = i % kTcChunks * 8;
        const bool ok = n0 + r < g.n && k0 + c < g.k;
        at::cp_async_16(at::smem_addr(&w_s[stage][r][c]), ok ? w + (n0 + r) * g.k + k0 + c : w, ok);
      }
    }
  };
  // FP8: the e4m3 tile of stage `stage` (k step kt) -> w_s[0], rows past n and columns past k
  // zero. A thread widens the same kWidenRows rows (r0 + kWidenStep j) and 8 columns (c8) at
  // every k step: their scale rows are found once.
  constexpr int kWidenStep = kThreads / kTcChunks, kWidenRows = kTcN / kWidenStep;
  const int r0 = static_cast<int>(threadIdx.x) / kTcChunks;
  const int c8 = static_cast<int>(threadIdx.x) % kTcChunks * 8;
  const float* widen_scales[kWidenRows];
#pragma unroll
  for (int j = 0; j < kWidenRows; ++j) {
    const int64_t row = n0 + r0 + kWidenStep * j;
    widen_scales[j] = kFp8 && row < g.n ? scale_row(g.scales, w_row0 + row) : nullptr;
  }
  const auto widen = [&](int64_t kt, int stage) {
    const int64_t col = kt * kTcK + c8;
#pragma unroll
    for (int j = 0; j < kWidenRows; ++j) {
      const int r = r0 + kWidenStep * j;
      const float scale =
          widen_scales[j] != nullptr && col < g.k ? scale_at(widen_scales[j], g.scales, col) : 0.0f;
      *reinterpret_cast<uint4*>(&w_s[0][r][c8]) =
          dequant8_bf16(*reinterpret_cast<const uint2*>(&w8_s[stage][r][c8]), scale);
    }
  };
#pragma unroll
  for (int s = 0; s < kTcStages - 1; ++s) {
    if (s < k_tiles) load(s, s);
    at::cp_async_commit();
  }

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int wr = 32 * (warp / 4), wc = 32 * (warp % 4);  // the warp's first row and column
  const int gq = lane / 4, t = lane % 4;
  float acc[2][4][4] = {};  // [m16 tile][n8 tile][C fragment]
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    // Tile kt has landed (kTcStages - 1 + kt groups committed, kTcStages - 2 may pend), and
    // every warp is done with tile kt - 1, whose stage the prefetch below overwrites (and, FP8,
    // with the bf16 tile the widening below overwrites).
    at::cp_async_wait<kTcStages - 2>();
    __syncthreads();
    if (kt + kTcStages - 1 < k_tiles) load(kt + kTcStages - 1, (kt + kTcStages - 1) % kTcStages);
    at::cp_async_commit();  // empty at the end: the group count stays in step
    const int st = static_cast<int>(kt % kTcStages);
    if constexpr (kFp8) {
      widen(kt, st);
      __syncthreads();
    }
    const int wt = kFp8 ? 0 : st;
#pragma unroll
    for (int kk = 0; kk < kTcK; kk += 16) {
      uint32_t a[2][4];
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        const bf16* lo = &a_s[st][wr + 16 * m + gq][kk + 2 * t];
        const bf16* hi = lo + 8 * kTcStride;
        a[m][0] = ld_bf16x2(lo);
        a[m][1] = ld_bf16x2(hi);
        a[m][2] = ld_bf16x2(lo + 8);
        a[m][3] = ld_bf16x2(hi + 8);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const bf16* b = &w_s[wt][wc + 8 * j + gq][kk + 2 * t];
        const uint32_t b0 = ld_bf16x2(b), b1 = ld_bf16x2(b + 8);
        at::mma_bf16(acc[0][j], a[0], b0, b1);
        at::mma_bf16(acc[1][j], a[1], b0, b1);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < 2; ++m) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = wr + 16 * m + gq + 8 * half;
      if (r >= rows) continue;
      bf16* y = g.y + static_cast<int64_t>(row0 + r) * g.n;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t col = n0 + wc + 8 * j + 2 * t;
        if (col < g.n) y[col] = cuda::to_bf16(acc[m][j][2 * half]);
        if (col + 1 < g.n) y[col + 1] = cuda::to_bf16(acc[m][j][2 * half + 1]);
      }
    }
  }
}

// ---- CUDA cores (any k, any alignment) ---------------------------------------------------------
//
// Shared-memory tiles of kTileM x kCoreN x kCoreK, element by element; each thread 2 rows x 4
// columns, f32 sums in a fixed order over K.
constexpr int kCoreN = 64;
constexpr int kCoreK = 32;
constexpr int kCoreThreads = 256;  // 16 x 16
static_assert(kTileM == 32, "the thread layout covers 32 rows");

template <bool kFp8>
__global__ void __launch_bounds__(kCoreThreads) moe_grouped_gemm_kernel(GroupedGemm g) {
  const auto tile = static_cast<int32_t>(blockIdx.x);
  if (tile >= *g.tiles.num_tiles) return;
  __shared__ int64_t a_row[kTileM];
  const MoeTile tl = tile_rows(g, tile, a_row);
  const int32_t rows = tl.rows, row0 = tl.row0;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kCoreN;
  const int64_t w_row0 = static_cast<int64_t>(tl.expert) * g.n;
  // Weight (row, col) of the expert, as bf16 widened to f32.
  const auto weight = [&](int64_t row, int64_t col) {
    const int64_t i = (w_row0 + row) * g.k + col;
    if constexpr (kFp8) {
      return dequant(static_cast<const uint8_t*>(g.w)[i],
                     scale_at(scale_row(g.scales, w_row0 + row), g.scales, col));
    } else {
      return cuda::to_f32(static_cast<const bf16*>(g.w)[i]);
    }
  };

  __shared__ float a_tile[kTileM][kCoreK + 1];
  __shared__ float w_tile[kCoreN][kCoreK + 1];
  const int tx = static_cast<int>(threadIdx.x % 16), ty = static_cast<int>(threadIdx.x / 16);
  float acc[2][4] = {};
  for (int64_t k0 = 0; k0 < g.k; k0 += kCoreK) {
    for (int i = static_cast<int>(threadIdx.x); i < kTileM * kCoreK; i += kCoreThreads) {
      const int r = i / kCoreK, c = i % kCoreK;
      const int64_t src = a_row[r];
      a_tile[r][c] = src >= 0 && k0 + c < g.k ? cuda::to_f32(g.a[src * g.k + k0 + c]) : 0.0f;
    }
    for (int i = static_cast<int>(threadIdx.x); i < kCoreN * kCoreK; i += kCoreThreads) {
      const int r = i / kCoreK, c = i % kCoreK;
      w_tile[r][c] = n0 + r < g.n && k0 + c < g.k ? weight(n0 + r, k0 + c) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int c = 0; c < kCoreK; ++c) {
      const float a0 = a_tile[ty][c], a1 = a_tile[ty + 16][c];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float b = w_tile[tx + 16 * j][c];
        acc[0][j] += a0 * b;
        acc[1][j] += a1 * b;
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = ty + 16 * i;
    if (r >= rows) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t col = n0 + tx + 16 * j;
      if (col < g.n) g.y[(row0 + r) * g.n + col] = cuda::to_bf16(acc[i][j]);
    }
  }
}

// Whether the tensor-core kernel takes the product: k % 8 == 0, a 16-byte aligned, w 16-byte
// (bf16) or 8-byte (e4m3) aligned.
template <bool kFp8>
bool on_tensor_cores(const void* a, const void* w, int64_t k) {
  return k % 8 == 0 && cuda::aligned(a, 16) && cuda::aligned(w, kFp8 ? 8 : 16);
}

// The grouped GEMM over tiles of tile_rows rows (64 only where on_tensor_cores).
template <bool kFp8>
void launch_grouped_gemm(const GroupedGemm& g, int64_t max_tiles, int32_t tile_rows,
                         cudaStream_t stream) {
  const bool tensor_cores = on_tensor_cores<kFp8>(g.a, g.w, g.k);
  INFLIGHT_CHECK(tile_rows == kTileM || (tile_rows == 2 * kTileM && tensor_cores),
                 "moe_experts_cuda: tiles of {} rows need the tensor-core kernel", tile_rows);
  const int64_t tile_n = tensor_cores ? kTcN : kCoreN;
  const int64_t col_tiles = (g.n + tile_n - 1) / tile_n;
  INFLIGHT_CHECK(max_tiles <= cuda::kMaxGridX && col_tiles <= 65535,
                 "moe_experts_cuda: {} x {} tiles exceed the grid", max_tiles, col_tiles);
  // Tiles vary fastest: the tiles of one expert, adjacent in the table, run side by side and
  // share its weight columns through L2.
  const dim3 grid(static_cast<unsigned>(max_tiles), static_cast<unsigned>(col_tiles));
  if (tile_rows == 2 * kTileM) {
    moe_grouped_gemm_tc_kernel<2 * kTileM, kFp8><<<grid, kTcThreads<2 * kTileM>, 0, stream>>>(g);
  } else if (tensor_cores) {
    moe_grouped_gemm_tc_kernel<kTileM, kFp8><<<grid, kTcThreads<kTileM>, 0, stream>>>(g);
  } else {
    moe_grouped_gemm_kernel<kFp8><<<grid, kCoreThreads, 0, stream>>>(g);
  }
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

// ---- small batches: GEMVs per pair, fused with the activation and the weighted sum ---------
//
// One warp per output row, 16-byte weight loads, kGemvUnroll of them in flight per lane:
//   gate/up + SwiGLU:  act[p, i] = silu(x[t] . gate[e, i]) * (x[t] . up[e, i]),  t = p / k,
//                      e = ids[p]: a warp reads both rows i of its pair's expert (grid: I / 8
//                      rows x pairs);
//   down + combine:    out[t, n] = sum_j weights[t, j] (act[t k + j] . down[ids[t k + j], n]):
//                      a warp reads row n of each of its token's k experts, the dot products
//                      summed in order j = 0..k-1 (grid: hidden / 8 rows x tokens).
// Sums in f32 throughout; act and out are rounded to bf16 once each.
constexpr int kGemvWarps = 8;
constexpr int kGemvUnroll = 4;

// This lane's part of dot(a[0..k), row `row` of the stacked weight w [E n, k]) over chunks of 8
// values: 16-byte loads of bf16 weights, or 8-byte loads of e4m3 ones (kFp8: dequantized as
// read, twice as many loads in flight). Chunk c goes to lane c % 32 and a lane sums its chunks
// in order, so both kinds of weight give the same sums (k % 8 == 0, a and w aligned).
template <bool kFp8>
__device__ __forceinline__ float lane_dot(const bf16* a, const void* w, int64_t row, int64_t k,
                                          const MoeWeightScales& scales, int lane) {
  using Chunk = std::conditional_t<kFp8, uint2, uint4>;
  constexpr int kUnroll = kFp8 ? 2 * kGemvUnroll : kGemvUnroll;
  const auto* av = reinterpret_cast<const uint4*>(a);
  const auto* wv = reinterpret_cast<const Chunk*>(w) + row * (k / 8);
  const float* row_scales = kFp8 ? scale_row(scales, row) : nullptr;
  const int64_t chunks = k / 8;
  float acc = 0.0f;
  for (int64_t base = lane; base < chunks; base += 32 * kUnroll) {
    Chunk wl[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = base + 32 * u;
      wl[u] = c < chunks ? __ldcs(wv + c) : Chunk{};
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = base + 32 * u;
      if (c >= chunks) break;
      float wf[8], af[8];
      if constexpr (kFp8) {
        cuda::unpack8(dequant8_bf16(wl[u], scale_at(row_scales, scales, c * 8)), wf);
      } else {
        cuda::unpack8(wl[u], wf);
      }
      cuda::unpack8(__ldg(av + c), af);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc = fmaf(wf[i], af[i], acc);
    }
  }
  return acc;
}

__device__ __forceinline__ float silu_mul(float g, float u) {
  return g / (1.0f + expf(-g)) * u;
}

template <bool kFp8>
__global__ void __launch_bounds__(kGemvWarps * 32) moe_pair_gate_up_kernel(MoeExpertsParams p) {
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (i >= p.inter) return;  // the whole warp leaves together
  const int64_t pair = blockIdx.y, e = p.ids[pair];
  const int64_t gate_row = e * 2 * p.inter + i;  // and up_row = gate_row + inter
  const bf16* x = static_cast<const bf16*>(p.x) + pair / p.k * p.hidden;
  const float g =
      cuda::warp_sum(lane_dot<kFp8>(x, p.gate_up_w, gate_row, p.hidden, p.gate_up_scales, lane));
  const float u = cuda::warp_sum(
      lane_dot<kFp8>(x, p.gate_up_w, gate_row + p.inter, p.hidden, p.gate_up_scales, lane));
  if (lane == 0) static_cast<bf16*>(p.act)[pair * p.inter + i] = cuda::to_bf16(silu_mul(g, u));
}

template <bool kFp8>
__global__ void __launch_bounds__(kGemvWarps * 32) moe_token_down_kernel(MoeExpertsParams p) {
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (n >= p.hidden) return;
  const int64_t t = blockIdx.y;
  // Lane j holds choice j's expert and weight (k <= 32), handed out by shuffles below.
  const int32_t my_id = lane < p.k ? p.ids[t * p.k + lane] : 0;
  const float my_weight = lane < p.k ? p.weights[t * p.k + lane] : 0.0f;
  const bf16* act = static_cast<const bf16*>(p.act) + t * p.k * p.inter;
  float total = 0.0f;
  for (int32_t j = 0; j < p.k; ++j) {
    const int64_t e = __shfl_sync(0xffffffffu, my_id, j);
    const float weight = __shfl_sync(0xffffffffu, my_weight, j);
    const float d = cuda::warp_sum(lane_dot<kFp8>(act + j * p.inter, p.down_w, e * p.hidden + n,
                                                  p.inter, p.down_scales, lane));
    total += weight * d;
  }
  if (lane == 0) static_cast<bf16*>(p.out)[t * p.hidden + n] = cuda::to_bf16(total);
}

// ---- 5. combine ----------------------------------------------------------------------------

// A block per (token, slice of kCombineThreads x kWidth columns). The token's k rows and weights
// are read into shared memory first, then each thread loads its columns of all k rows at once
// (independent loads: one memory latency, not k) and sums them in the order j = 0..k-1.
// Rows are found through pair_position.
constexpr int kCombineThreads = 256;

template <int kWidth>  // columns per thread: 8 (uint4) or 1
__global__ void __launch_bounds__(kCombineThreads) moe_combine_kernel(MoeExpertsParams p) {
  __shared__ int64_t rows[kMoeMaxTopK];
  __shared__ float weights[kMoeMaxTopK];
  const int64_t t = blockIdx.x;
  if (threadIdx.x < p.k) {
    const int64_t pair = t * p.k + threadIdx.x;
    rows[threadIdx.x] = p.pair_position[pair];
    weights[threadIdx.x] = p.weights[pair];
  }
  __syncthreads();
  const auto* expert_out = static_cast<const bf16*>(p.expert_out);
  bf16* out = static_cast<bf16*>(p.out) + t * p.hidden;
  const int64_t per_row = p.hidden / kWidth;
  for (int64_t v = static_cast<int64_t>(blockIdx.y) * kCombineThreads + threadIdx.x; v < per_row;
       v += static_cast<int64_t>(gridDim.y) * kCombineThreads) {
    const int64_t c = v * kWidth;
    float acc[kWidth] = {};
#pragma unroll 8
    for (int32_t j = 0; j < p.k; ++j) {
      const bf16* src = expert_out + rows[j] * p.hidden + c;
      float x[kWidth];
      if constexpr (kWidth == 8) {
        cuda::unpack8(*reinterpret_cast<const uint4*>(src), x);
      } else {
        x[0] = cuda::to_f32(*src);
      }
#pragma unroll
      for (int i = 0; i < kWidth; ++i) acc[i] += weights[j] * x[i];
    }
    if constexpr (kWidth == 8) {
      uint4 ov;
      auto* o2 = reinterpret_cast<__nv_bfloat162*>(&ov);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        o2[i] = __halves2bfloat162(cuda::to_bf16(acc[2 * i]), cuda::to_bf16(acc[2 * i + 1]));
      }
      *reinterpret_cast<uint4*>(out + c) = ov;
    } else {
      out[c] = cuda::to_bf16(acc[0]);
    }
  }
}

// act = silu_mul(gate_up) over all pairs; quantized: act's rows also into act_q, as e4m3 with a
// scale per row (act_q_scales).
void launch_swiglu(const MoeExpertsParams& p, bool quantized, cudaStream_t stream) {
  SwigluParams s;
  s.gate_up = p.gate_up;
  s.out = p.act;
  s.rows = p.pairs();
  s.inter = p.inter;
  s.dtype = DType::kBF16;
  if (quantized) {  // the down product reads act_q, not act
    s.q_values = p.act_q;
    s.q_scales = p.act_q_scales;
    s.skip_out = true;
  }
  swiglu_cuda(s, stream);
}

void launch_combine(const MoeExpertsParams& p, cudaStream_t stream) {
  const bool vec = p.hidden % 8 == 0 && cuda::aligned(p.expert_out, 16) && cuda::aligned(p.out, 16);
  const int64_t per_row = vec ? p.hidden / 8 : p.hidden;
  const dim3 grid(static_cast<unsigned>(p.tokens),
                  static_cast<unsigned>(
                      std::min<int64_t>(65535, (per_row + kCombineThreads - 1) / kCombineThreads)));
  if (vec) {
    moe_combine_kernel<8><<<grid, kCombineThreads, 0, stream>>>(p);
  } else {
    moe_combine_kernel<1><<<grid, kCombineThreads, 0, stream>>>(p);
  }
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

// Whether the GEMV path can read every row in chunks of 8 values (16-byte loads; 8-byte ones
// of e4m3 weights).
bool gemv_path_fits(const MoeExpertsParams& p) {
  return p.hidden % 8 == 0 && p.inter % 8 == 0 && cuda::aligned(p.x, 16) &&
         cuda::aligned(p.gate_up_w, 16) && cuda::aligned(p.down_w, 16) && cuda::aligned(p.act, 16);
}

template <bool kFp8>
void moe_experts_by_pair(const MoeExpertsParams& p, cudaStream_t stream) {
  const auto blocks = [](int64_t rows) { return (rows + kGemvWarps - 1) / kGemvWarps; };
  INFLIGHT_CHECK(blocks(std::max(p.inter, p.hidden)) <= cuda::kMaxGridX && p.pairs() <= 65535,
                 "moe_experts_cuda: {} pairs of {} / {} rows exceed the grid", p.pairs(), p.inter,
                 p.hidden);
  const dim3 gate_up_grid(static_cast<unsigned>(blocks(p.inter)), static_cast<unsigned>(p.pairs()));
  moe_pair_gate_up_kernel<kFp8><<<gate_up_grid, kGemvWarps * 32, 0, stream>>>(p);
  INFLIGHT_CUDA_CHECK_LAUNCH();
  const dim3 down_grid(static_cast<unsigned>(blocks(p.hidden)), static_cast<unsigned>(p.tokens));
  moe_token_down_kernel<kFp8><<<down_grid, kGemvWarps * 32, 0, stream>>>(p);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

// x's rows in pair order for the bf16 product on TMA, whose a must be contiguous: expert_out row
// r = x[sorted_pairs[r] / k] (expert_out is free until the down product writes it). Rows of
// 16-byte chunks (moe_wgmma_gemm_fits).
constexpr int kGatherThreads = 128;
__global__ void __launch_bounds__(kGatherThreads) moe_gather_x_kernel(MoeExpertsParams p) {
  const int64_t r = blockIdx.x, chunks = p.hidden / 8;
  const auto* from = static_cast<const uint4*>(p.x) + p.sorted_pairs[r] / p.k * chunks;
  auto* to = static_cast<uint4*>(p.expert_out) + r * chunks;
  for (int64_t c = threadIdx.x; c < chunks; c += kGatherThreads) to[c] = from[c];
}

// The grouped path on wgmma (ops/moe_wgmma_gemm.cuh): bf16 experts with x's rows gathered in
// pair order into expert_out; FP8 experts W8A8, x's rows quantized per token in pair order into
// act_q first (the TMA kernel reads a contiguous) and the SwiGLU writing act's quantized rows
// into act_q. False (nothing launched) where the kernels do not take both products.
template <bool kFp8>
bool run_experts_wgmma(const MoeExpertsParams& p, cudaStream_t stream) {
  if (kFp8 ? p.act_q == nullptr : !cuda::aligned(p.x, 16)) return false;
  MoeWgmmaGemm gate_up;
  gate_up.fp8 = kFp8;
  gate_up.a = kFp8 ? static_cast<const void*>(p.act_q) : p.expert_out;
  gate_up.a_scales = p.act_q_scales;
  gate_up.rows = p.pairs();
  gate_up.w = p.gate_up_w;
  gate_up.experts = p.num_experts;
  gate_up.scales = p.gate_up_scales;
  gate_up.y = static_cast<bf16*>(p.gate_up);
  gate_up.tiles = p.tile_table();
  gate_up.n = 2 * p.inter;
  gate_up.k = p.hidden;
  gate_up.expected_rows = p.pairs();
  gate_up.expected_tiles = moe_expected_tiles(p.pairs(), p.num_experts);
  MoeWgmmaGemm down = gate_up;  // act rows are in expert order already
  down.a = kFp8 ? static_cast<const void*>(p.act_q) : p.act;
  down.w = p.down_w;
  down.scales = p.down_scales;
  down.y = static_cast<bf16*>(p.expert_out);
  down.n = p.hidden;
  down.k = p.inter;
  if (!moe_wgmma_gemm_fits(gate_up) || !moe_wgmma_gemm_fits(down)) return false;

  moe_align_kernel<<<1, kAlignThreads, 0, stream>>>(p, kMoeWgmmaTileRows);
  INFLIGHT_CUDA_CHECK_LAUNCH();
  const int64_t max_tiles = (p.pairs() + kMoeWgmmaTileRows - 1) / kMoeWgmmaTileRows + p.num_experts;
  if constexpr (!kFp8) {  // expert_out row r: x's row of sorted pair r
    moe_gather_x_kernel<<<static_cast<unsigned>(p.pairs()), kGatherThreads, 0, stream>>>(p);
    INFLIGHT_CUDA_CHECK_LAUNCH();
  } else {  // act_q row r: x's row of sorted pair r, quantized
    QuantizeFp8Params qx;
    qx.x = p.x;
    qx.x_rows = p.sorted_pairs;
    qx.x_row_div = p.k;
    qx.values = p.act_q;
    qx.scales = p.act_q_scales;
    qx.m = p.pairs();
    qx.k = p.hidden;
    qx.dtype = DType::kBF16;
    quantize_fp8_cuda(qx, stream);
  }
  moe_wgmma_gemm_cuda(gate_up, max_tiles, stream);
  launch_swiglu(p, kFp8, stream);
  moe_wgmma_gemm_cuda(down, max_tiles, stream);
  launch_combine(p, stream);
  return true;
}

template <bool kFp8>
void run_experts(const MoeExpertsParams& p, cudaStream_t stream, bool batch_invariant) {
  if (!batch_invariant && p.pairs() <= p.num_experts && gemv_path_fits(p)) {
    moe_experts_by_pair<kFp8>(p, stream);
    return;
  }
  if (run_experts_wgmma<kFp8>(p, stream)) return;
  // Tiles of 64 rows where experts get 64 rows on average and both products take tensor cores:
  // each weight tile is then read once per 64 rows instead of 32. (Fewer tiles than the
  // workspace's bound of 32-row tiles.)
  const bool tall = p.pairs() >= 2 * kTileM * p.num_experts &&
                    on_tensor_cores<kFp8>(p.x, p.gate_up_w, p.hidden) &&
                    on_tensor_cores<kFp8>(p.act, p.down_w, p.inter);
  const int32_t tile_rows = tall ? 2 * kTileM : kTileM;
  moe_align_kernel<<<1, kAlignThreads, 0, stream>>>(p, tile_rows);
  INFLIGHT_CUDA_CHECK_LAUNCH();

  const int64_t max_tiles = (p.pairs() + tile_rows - 1) / tile_rows + p.num_experts;
  GroupedGemm g;
  g.tiles = p.tile_table();
  // gate/up: x rows gathered by sorted pair -> gate_up [pairs, 2 I].
  g.a = static_cast<const bf16*>(p.x);
  g.a_rows = p.sorted_pairs;
  g.a_div = p.k;
  g.w = p.gate_up_w;
  g.scales = p.gate_up_scales;
  g.y = static_cast<bf16*>(p.gate_up);
  g.n = 2 * p.inter;
  g.k = p.hidden;
  launch_grouped_gemm<kFp8>(g, max_tiles, tile_rows, stream);

  launch_swiglu(p, false, stream);

  // down: act rows (already in expert order) -> expert_out [pairs, hidden].
  g.a = static_cast<const bf16*>(p.act);
  g.a_rows = nullptr;
  g.a_div = 1;
  g.w = p.down_w;
  g.scales = p.down_scales;
  g.y = static_cast<bf16*>(p.expert_out);
  g.n = p.hidden;
  g.k = p.inter;
  launch_grouped_gemm<kFp8>(g, max_tiles, tile_rows, stream);

  launch_combine(p, stream);
}

}  // namespace

void moe_experts_cuda(const MoeExpertsParams& p, cudaStream_t stream, bool batch_invariant) {
  INFLIGHT_CHECK_CODE(p.dtype == DType::kBF16, ErrorCode::kUnsupported,
                      "moe_experts_cuda: bf16 only, got {}", dtype_name(p.dtype));
  if (p.tokens == 0) return;
  INFLIGHT_CHECK(p.tokens <= cuda::kMaxGridX, "moe_experts_cuda: {} tokens exceed the grid",
                 p.tokens);
  if (p.fp8_weights) {
    run_experts<true>(p, stream, batch_invariant);
  } else {
    run_experts<false>(p, stream, batch_invariant);
  }
}

}  // namespace inflight
