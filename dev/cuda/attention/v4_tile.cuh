// Version 4 of the tile path (attention_tile.cuh before the version-5 pass), kept for the lab
// bench only: it times the new kernels against this one in the same run. Namespace
// inflight::lab::v4; the split-KV workspace and SM count come from the production file.
// One lab switch: kh_fastest (the grid order of prefill tiles: (tile, kv head) with the kv head
// fastest, i.e. version 5's longest-first order, with everything else as in version 4).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "ops/attention_mma.cuh"
#include "ops/attention_tile_launch.cuh"
#include "ops/cuda_common.cuh"
#include "ops/paged_attention.h"

namespace inflight::lab::v4 {

using namespace inflight::attention;
using attention::kMaxSplitTiles;
using cuda::allow_dynamic_smem;
using cuda::num_sms;
using attention::split_workspace;
using attention::SplitWorkspace;
using cuda::bf16;

constexpr int kDecodeRows = 16;   // rows of a decode tile: n * g <= 16 makes a decode sequence
constexpr int kMaxParts = 256;    // split-KV parts per decode tile, at most
constexpr int kMinPartLen = 128;  // keys per part, at least (a part costs a partial write)
constexpr float kLog2e = 1.4426950408889634f;

// The op's params plus the launch plan made on the host.
struct TileParams {
  PagedAttentionParams p;
  int32_t group = 1;        // g = H / KH
  float scale_log2 = 1.0f;  // p.scale * log2(e): scores live in the log2 domain
  // Split-KV of decode tiles: a tile's key range of len keys is cut into parts of
  // part_length(len) keys, at most max_parts of them. max_parts == 1: no split, no workspace.
  int32_t part_len = 1;
  int32_t max_parts = 1;         // <= kMaxParts
  float* partial_o = nullptr;    // [S, KH, max_parts, 16, D] unnormalised outputs
  float2* partial_ml = nullptr;  // [S, KH, max_parts, 16] (running max, sum), log2 domain
  int32_t* counters = nullptr;   // [S, KH] parts finished; 0 between launches
  bool kh_fastest = false;       // lab: prefill grid (tiles * KH) with the kv head fastest
};

__device__ __forceinline__ bool is_decode_seq(int32_t n, int32_t g) {
  return n * g <= kDecodeRows;
}

struct KeyRange {
  int32_t lo, hi;  // inclusive
};

// The keys that tokens [first, last] of a sequence (context ctx, n new tokens) may read.
__device__ __forceinline__ KeyRange token_keys(int32_t window, int32_t ctx, int32_t n,
                                               int32_t first, int32_t last) {
  const int32_t p_first = ctx - n + first;
  return {window > 0 ? max(0, p_first - window + 1) : 0, ctx - n + last};
}

// Keys per split-KV part for a range of len keys: never more than max_parts parts, even when
// the host's max_context_len hint undercounts.
__device__ __forceinline__ int32_t part_length(const TileParams& tp, int32_t len) {
  return max(tp.part_len, (len + tp.max_parts - 1) / tp.max_parts);
}

template <int D, int kWarpsM, int kWarpsN, int kStages_>
struct TileShape {
  static_assert(D == 64 || D == 128, "tiles are built for head_dim 64 and 128");
  static_assert(kWarpsM == 1 || kWarpsN == 1, "warps split either rows or keys");
  static constexpr bool kDecode = kWarpsM == 1;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kRows = 16 * kWarpsM;
  static constexpr int kWarpKeys = kDecode ? 16 : 64;  // keys of a stage per warp
  static constexpr int kKeys = kWarpKeys * kWarpsN;    // keys per stage
  static constexpr int kChunks = D / 8;                // 16-byte chunks per row
  static constexpr int kRowBytes = D * 2;
  static constexpr int kQBytes = kRows * kRowBytes;
  static constexpr int kStageBytes = kKeys * kRowBytes;  // K (or V) of one stage
  static constexpr int kStages = kStages_;
  static constexpr int kKvBytes = 2 * kStages * kStageBytes;
  static constexpr int kOStride = D + 4;  // floats per row of the cross-warp merge
  // Decode epilogue, over the K/V stages: the warps' states, then the split-KV merge weights.
  static constexpr int kStatesBytes = kWarpsN * 16 * (kOStride * 4 + 8);
  static constexpr int kMergeBytes = kDecode ? kStatesBytes + kDecodeRows * kMaxParts * 4 : 0;
  // + 1024: the base is rounded up to the 1024-byte alignment of the swizzle pattern.
  static constexpr int kSmemBytes =
      kQBytes + (kKvBytes > kMergeBytes ? kKvBytes : kMergeBytes) + 1024;
  static_assert(kKeys % (kThreads / kChunks) == 0, "whole load passes");
  static_assert(kQBytes % 1024 == 0 && kStageBytes % 1024 == 0, "1024-byte aligned tiles");
};

// Byte offset of 16-byte chunk c of row r in a [kTileRows, D] bf16 tile stored as 64-element
// (128-byte) slabs, slab after slab: slab c / 8, row r at 128 r, chunk c % 8 XOR-swizzled by
// r % 8. The 8 row addresses of one ldmatrix matrix (one chunk, 8 consecutive rows) fall in 8
// different bank groups, and the pattern is wgmma's 128-byte swizzle.
template <int kTileRows>
__device__ __forceinline__ uint32_t tile_offset(int r, int c) {
  return static_cast<uint32_t>((c >> 3) * (kTileRows * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// Stages keys [kb, kb + kKeys) of sequence `seq`, kv head kh into shared K/V at sk, sv. Keys
// past hi are zero-filled: their scores are masked, and zero V keeps 0 * V finite.
template <class Shape>
__device__ __forceinline__ void load_kv_stage(const PagedKv& kv, int32_t seq, int32_t kh,
                                              int32_t kb, int32_t hi, uint32_t sk, uint32_t sv) {
  constexpr int kRowsPerPass = Shape::kThreads / Shape::kChunks;
  const auto* k = static_cast<const bf16*>(kv.k);
  const auto* v = static_cast<const bf16*>(kv.v);
  const int c = threadIdx.x % Shape::kChunks;
#pragma unroll
  for (int i = 0; i < Shape::kKeys / kRowsPerPass; ++i) {
    const int r = threadIdx.x / Shape::kChunks + i * kRowsPerPass;
    const bool valid = kb + r <= hi;
    int64_t off = 0;
    if (valid) off = kv.offset(kv.slot(seq, kb + r), kh) + c * 8;
    cp_async_16(sk + tile_offset<Shape::kKeys>(r, c), k + off, valid);
    cp_async_16(sv + tile_offset<Shape::kKeys>(r, c), v + off, valid);
  }
}

// Prefill tiles are numbered over the sequences with n * g > 16 in batch order; inside a
// sequence the last tile (most keys) comes first, so that the longest CTAs start earliest.
// Every thread of the block calls this (block-wide scan of tiles per sequence); false past the
// last tile.
template <int kRows, int kThreads>
__device__ bool find_prefill_tile(const TileParams& tp, int32_t item, int32_t& seq, int32_t& tile) {
  __shared__ int32_t warp_total[kThreads / 32];
  __shared__ int32_t found[2];
  const int32_t* qs = tp.p.query_start;
  const int32_t g = tp.group, num_seqs = tp.p.num_seqs;
  auto tiles_of = [&](int32_t s) {
    const int32_t rows = (qs[s + 1] - qs[s]) * g;
    return rows > kDecodeRows ? (rows + kRows - 1) / kRows : 0;
  };
  const int32_t per_thread = (num_seqs + kThreads - 1) / kThreads;
  const int32_t begin = min(num_seqs, static_cast<int32_t>(threadIdx.x) * per_thread);
  const int32_t end = min(num_seqs, begin + per_thread);
  int32_t count = 0;
  for (int32_t s = begin; s < end; ++s) count += tiles_of(s);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int32_t incl = count;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int32_t x = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += x;
  }
  if (lane == 31) warp_total[warp] = incl;
  if (threadIdx.x == 0) found[0] = -1;
  __syncthreads();
  for (int w = 0; w < warp; ++w) incl += warp_total[w];
  int32_t excl = incl - count;
  if (item >= excl && item < incl) {
    for (int32_t s = begin; s < end; ++s) {
      const int32_t t = tiles_of(s);
      if (item < excl + t) {
        found[0] = s;
        found[1] = t - 1 - (item - excl);
        break;
      }
      excl += t;
    }
  }
  __syncthreads();
  seq = found[0];
  tile = found[1];
  return seq >= 0;
}

// Split-KV merge of one decode tile, run by the last of its CTAs to finish: for each row,
// out = sum_p 2^(m_p - M) o_p / sum_p 2^(m_p - M) l_p with M = max_p m_p (finite: the part that
// holds the row's own position saw that key). Partials come through L2 (other CTAs of this
// launch wrote them). item: the tile's first partial row; weight: shared [16, kMaxParts].
template <int D, int kThreads, class RowOffset>
__device__ void merge_parts(const TileParams& tp, int64_t item, int32_t num_parts, int32_t rows,
                            float* weight, RowOffset row_offset) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < rows; r += kThreads / 32) {
    float mx = -INFINITY;
    for (int i = lane; i < num_parts; i += 32) {
      mx = fmaxf(mx, __ldcg(tp.partial_ml + item + i * kDecodeRows + r).x);
    }
    mx = cuda::warp_max(mx);
    float sum = 0.0f;
    for (int i = lane; i < num_parts; i += 32) {
      const float2 ml = __ldcg(tp.partial_ml + item + i * kDecodeRows + r);
      const float w = exp2f(ml.x - mx);
      weight[r * kMaxParts + i] = w;
      sum += ml.y * w;
    }
    const float inv = 1.0f / cuda::warp_sum(sum);
    for (int i = lane; i < num_parts; i += 32) weight[r * kMaxParts + i] *= inv;
  }
  __syncthreads();
  auto* out = static_cast<bf16*>(tp.p.out);
  for (int i = threadIdx.x; i < rows * (D / 4); i += kThreads) {
    const int r = i / (D / 4), c4 = (i % (D / 4)) * 4;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int pi = 0; pi < num_parts; ++pi) {
      const float w = weight[r * kMaxParts + pi];
      const float4 v = __ldcg(
          reinterpret_cast<const float4*>(tp.partial_o + (item + pi * kDecodeRows + r) * D + c4));
      acc.x += w * v.x;
      acc.y += w * v.y;
      acc.z += w * v.z;
      acc.w += w * v.w;
    }
    *reinterpret_cast<uint2*>(out + row_offset(r) + c4) =
        make_uint2(pack_bf16x2(acc.x, acc.y), pack_bf16x2(acc.z, acc.w));
  }
}

template <int N>
__device__ __forceinline__ float (&quad(float (&a)[N], int i))[4] {
  return *reinterpret_cast<float(*)[4]>(&a[4 * i]);
}

// CTAs per SM that shared memory allows and registers must not prevent: two 8-warp wgmma
// prefill CTAs (<= 128 registers a thread), three 2-stage decode CTAs (<= 168).
template <int kWarpsM, int kStages, bool kWgmma>
constexpr int tile_min_blocks() {
  if (kWarpsM == 1) return kStages == 2 ? 3 : 1;
  return kWgmma && kHasWgmma && kWarpsM == 8 && kStages == 2 ? 2 : 1;
}

// Grid: decode tiles (max_parts, S, KH), CTAs past a sequence's parts or on a prefill sequence
// exit; prefill tiles (upper bound on tiles, KH), CTAs past the last tile exit. kWgmma (prefill
// tiles; in effect only where the sm_90a pass compiles it) computes S = Q K^T and O += P V by
// warpgroup wgmma with Q, K and V read from shared memory by the tensor cores, instead of
// per-warp mma.sync fed by ldmatrix; everything else is shared.
template <int D, int kWarpsM, int kWarpsN, int kStages, bool kWgmma>
__global__ void __launch_bounds__(TileShape<D, kWarpsM, kWarpsN, kStages>::kThreads,
                                  tile_min_blocks<kWarpsM, kStages, kWgmma>())
    paged_attention_tile_kernel(TileParams tp) {
  using Shape = TileShape<D, kWarpsM, kWarpsN, kStages>;
  constexpr bool kDecode = Shape::kDecode;
  constexpr bool kUseWgmma = kWgmma && !kDecode && kHasWgmma;
  static_assert(!kWgmma || kWarpsM % 4 == 0, "wgmma tiles are whole warpgroups");
  constexpr int kKeys = Shape::kKeys, kWarpKeys = Shape::kWarpKeys, kNt = kWarpKeys / 8;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_addr = smem_addr(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  const PagedAttentionParams& p = tp.p;
  const int32_t g = tp.group;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int warp_m = warp / kWarpsN, warp_n = warp % kWarpsN;

  // ---- the tile: sequence, rows [r0, r0 + rows), keys [keys.lo, keys.hi] ----
  int32_t seq = 0, r0 = 0, part = 0, kh = 0;
  if constexpr (kDecode) {
    part = blockIdx.x;
    seq = blockIdx.y;
    kh = blockIdx.z;
  } else {
    int32_t tile = 0;
    const int32_t kvh = p.kv.num_kv_heads;
    const int32_t item = tp.kh_fastest ? blockIdx.x / kvh : blockIdx.x;
    if (!find_prefill_tile<Shape::kRows, Shape::kThreads>(tp, item, seq, tile)) return;
    r0 = tile * Shape::kRows;
    kh = tp.kh_fastest ? blockIdx.x % kvh : blockIdx.y;
  }
  const int32_t q0 = p.query_start[seq], n = p.query_start[seq + 1] - q0;
  const int32_t ctx = p.context_lens[seq];
  if (kDecode && !is_decode_seq(n, g)) return;
  const int32_t rows = min(Shape::kRows, n * g - r0);
  KeyRange keys = token_keys(p.sliding_window, ctx, n, r0 / g, (r0 + rows - 1) / g);
  int32_t num_parts = 1;
  if constexpr (kDecode) {
    const int32_t len = keys.hi - keys.lo + 1, part_len = part_length(tp, len);
    num_parts = (len + part_len - 1) / part_len;
    if (part >= num_parts) return;
    keys.lo += part * part_len;
    keys.hi = min(keys.hi, keys.lo + part_len - 1);
  }

  unsigned char* sq = smem;
  const uint32_t sq_addr = smem_addr(smem);
  const uint32_t sk_addr = sq_addr + Shape::kQBytes;
  const uint32_t sv_addr = sk_addr + kStages * Shape::kStageBytes;
  const int32_t num_heads = p.num_heads;
  // Global element offset of row r of the tile in q / out ([T, H, D]).
  auto row_offset = [&](int r) {
    const int32_t row = r0 + r;
    return (static_cast<int64_t>(q0 + row / g) * num_heads + kh * g + row % g) * D;
  };

  // ---- prologue: Q rows (zero past `rows`) and K/V blocks 0 .. kStages - 2 ----
  const auto* q = static_cast<const bf16*>(p.q);
  for (int i = tid; i < Shape::kRows * Shape::kChunks; i += Shape::kThreads) {
    const int r = i / Shape::kChunks, c = i % Shape::kChunks;
    const bool valid = r < rows;
    cp_async_16(sq_addr + tile_offset<Shape::kRows>(r, c), valid ? q + row_offset(r) + c * 8 : q,
                valid);
  }
  const int32_t num_blocks = (keys.hi - keys.lo + kKeys) / kKeys;
#pragma unroll
  for (int b = 0; b < kStages - 1; ++b) {
    if (b < num_blocks) {
      load_kv_stage<Shape>(p.kv, seq, kh, keys.lo + b * kKeys, keys.hi,
                           sk_addr + b * Shape::kStageBytes, sv_addr + b * Shape::kStageBytes);
    }
    cp_async_commit();  // one group per block, empty or not: the waits below count groups
  }

  // This thread's two fragment rows (g, g + 8 of its row warp), clamped to the last valid row,
  // and the keys each may read within this tile's range.
  int32_t row_lo[2], row_hi[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = min(warp_m * 16 + lane / 4 + 8 * h, rows - 1);
    const int32_t pos = ctx - n + (r0 + r) / g;
    row_lo[h] = p.sliding_window > 0 ? max(0, pos - p.sliding_window + 1) : 0;
    row_hi[h] = min(pos, keys.hi);
  }

  // o[4 dt + e]: the mma C fragment of output columns 8 dt .. 8 dt + 7.
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  uint32_t qf[kUseWgmma ? 1 : D / 16][4];  // Q A fragments (mma.sync only)

  for (int32_t j = 0; j < num_blocks; ++j) {
    const int stage = j % kStages;
    {
      // Block j + kStages - 1 goes into the stage that iteration j - 1 consumed.
      const int32_t next = j + kStages - 1;
      if (next < num_blocks) {
        const uint32_t off = (next % kStages) * Shape::kStageBytes;
        load_kv_stage<Shape>(p.kv, seq, kh, keys.lo + next * kKeys, keys.hi, sk_addr + off,
                             sv_addr + off);
      }
      cp_async_commit();
    }
    cp_async_wait<kStages - 1>();  // block j (and Q) have landed
    if constexpr (kUseWgmma) fence_proxy_async();
    __syncthreads();
    const int kw0 = warp_n * kWarpKeys;  // this warp's first key row in the stage
    const int32_t kb = keys.lo + j * kKeys + kw0;
    const uint32_t wk = sk_addr + stage * Shape::kStageBytes;
    const uint32_t wv = sv_addr + stage * Shape::kStageBytes;

    // S = Q K^T over this warp's kWarpKeys keys: [16 rows, kWarpKeys] as kNt n8 tiles,
    // s[4 nt + e].
    float s[kNt * 4];
#pragma unroll
    for (int i = 0; i < kNt * 4; ++i) s[i] = 0.0f;
    if constexpr (kUseWgmma) {
      const uint32_t q_rows = (warp / 4) * 64 * 128;  // this warpgroup's 64 rows in a slab
      fence_registers(s);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint32_t qa = sq_addr + (kk / 4) * (Shape::kRows * 128) + q_rows + (kk % 4) * 32;
        const uint32_t ka = wk + (kk / 4) * (kKeys * 128) + (kk % 4) * 32;
        wgmma_m64n64k16_ss(s, wgmma_desc(qa, 0, 1024), wgmma_desc(ka, 0, 1024));
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(s);
    } else {
      if (j == 0) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          ldmatrix_x4(qf[kk], sq_addr + tile_offset<Shape::kRows>(warp_m * 16 + lane % 16,
                                                                  kk * 2 + lane / 16));
        }
      }
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
        for (int np = 0; np < kNt / 2; ++np) {
          uint32_t b[4];
          ldmatrix_x4(b, wk + tile_offset<kKeys>(kw0 + np * 16 + (lane / 16) * 8 + lane % 8,
                                                 kk * 2 + (lane / 8) % 2));
          mma_bf16(quad(s, 2 * np), qf[kk], b[0], b[1]);
          mma_bf16(quad(s, 2 * np + 1), qf[kk], b[2], b[3]);
        }
      }
    }

    // Scale to the log2 domain; mask keys outside each row's [lo, hi] (only near the diagonal,
    // the window's start, or the range's end).
    const bool full =
        kb >= max(row_lo[0], row_lo[1]) && kb + kWarpKeys - 1 <= min(row_hi[0], row_hi[1]);
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int32_t key = kb + nt * 8 + 2 * (lane % 4) + (e % 2);
        const int h = e / 2;
        s[4 * nt + e] *= tp.scale_log2;
        if (!full && (key < row_lo[h] || key > row_hi[h])) s[4 * nt + e] = -INFINITY;
      }
    }

    // Online softmax: per row, new max over the 4 lanes of the quad, rescale, exponentiate.
    float base[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
        mx = fmaxf(mx, fmaxf(s[4 * nt + 2 * h], s[4 * nt + 2 * h + 1]));
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[h], mx);
      base[h] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet stays at 0
      const float correction = exp2f(m[h] - base[h]);
      m[h] = m_new;
      l[h] *= correction;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[4 * dt + 2 * h] *= correction;
        o[4 * dt + 2 * h + 1] *= correction;
      }
    }
#pragma unroll
    for (int i = 0; i < kNt * 4; ++i) {
      s[i] = exp2f(s[i] - base[(i % 4) / 2]);
      l[(i % 4) / 2] += s[i];  // this lane's part of the row sum; the quad is summed at the end
    }

    // O += P V, P from the score registers (two n8 C tiles = one k16 A fragment).
    uint32_t a[kNt / 2][4];
#pragma unroll
    for (int kk = 0; kk < kNt / 2; ++kk) {
      a[kk][0] = pack_bf16x2(s[8 * kk + 0], s[8 * kk + 1]);
      a[kk][1] = pack_bf16x2(s[8 * kk + 2], s[8 * kk + 3]);
      a[kk][2] = pack_bf16x2(s[8 * kk + 4], s[8 * kk + 5]);
      a[kk][3] = pack_bf16x2(s[8 * kk + 6], s[8 * kk + 7]);
    }
    if constexpr (kUseWgmma) {
      fence_registers(o);
      fence_registers(a);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kNt / 2; ++kk) {
        const uint64_t vd = wgmma_desc(wv + kk * 16 * 128, kKeys * 128, 1024);
        if constexpr (D == 128) {
          wgmma_m64n128k16_rs(o, a[kk], vd);
        } else {
          wgmma_m64n64k16_rs(o, a[kk], vd);
        }
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(o);
    } else {
#pragma unroll
      for (int kk = 0; kk < kNt / 2; ++kk) {
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t b[4];
          ldmatrix_x4_trans(b,
                            wv + tile_offset<kKeys>(kw0 + kk * 16 + ((lane / 8) % 2) * 8 + lane % 8,
                                                    dp * 2 + lane / 16));
          mma_bf16(quad(o, 2 * dp), a[kk], b[0], b[1]);
          mma_bf16(quad(o, 2 * dp + 1), a[kk], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // the stage is free for the load kStages - 1 iterations on
  }
  cp_async_wait<0>();  // only empty groups can remain; none may be in flight at exit
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }

  auto* out = static_cast<bf16*>(p.out);
  if constexpr (!kDecode) {
    // Every valid row saw its own key, so l >= 1. The warp's output rows go through its own
    // rows of the Q tile (no longer read) for 16-byte stores.
    const float inv[2] = {1.0f / l[0], 1.0f / l[1]};
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp_m * 16 + lane / 4 + 8 * h;
        *reinterpret_cast<uint32_t*>(sq + tile_offset<Shape::kRows>(r, dt) + (lane % 4) * 4) =
            pack_bf16x2(o[4 * dt + 2 * h] * inv[h], o[4 * dt + 2 * h + 1] * inv[h]);
      }
    }
    __syncwarp();
    for (int i = lane; i < 16 * Shape::kChunks; i += 32) {
      const int r = warp_m * 16 + i / Shape::kChunks, c = i % Shape::kChunks;
      if (r < rows) {
        *reinterpret_cast<uint4*>(out + row_offset(r) + c * 8) =
            *reinterpret_cast<const uint4*>(sq + tile_offset<Shape::kRows>(r, c));
      }
    }
  } else {
    // Merge the key warps' states in shared memory (the loop ended at a barrier with no copy
    // in flight, so the K/V stages are free), then write out or leave a split part's partial.
    constexpr int kStride = Shape::kOStride;
    float* red_o = reinterpret_cast<float*>(smem + Shape::kQBytes);  // [kWarpsN, 16, kStride]
    auto* red_ml = reinterpret_cast<float2*>(red_o + kWarpsN * 16 * kStride);  // [kWarpsN, 16]
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = lane / 4 + 8 * h;
        *reinterpret_cast<float2*>(red_o + (warp_n * 16 + r) * kStride + dt * 8 + 2 * (lane % 4)) =
            make_float2(o[4 * dt + 2 * h], o[4 * dt + 2 * h + 1]);
      }
    }
    if (lane % 4 == 0) {
      red_ml[warp_n * 16 + lane / 4] = make_float2(m[0], l[0]);
      red_ml[warp_n * 16 + lane / 4 + 8] = make_float2(m[1], l[1]);
    }
    __syncthreads();
    const bool split = num_parts > 1;
    const int32_t tile_index = seq * p.kv.num_kv_heads + kh;
    const int64_t first_item = static_cast<int64_t>(tile_index) * tp.max_parts * kDecodeRows;
    const int64_t item = first_item + static_cast<int64_t>(part) * kDecodeRows;
    for (int i = tid; i < rows * (D / 4); i += Shape::kThreads) {
      const int r = i / (D / 4), c4 = (i % (D / 4)) * 4;
      float mx = -INFINITY;
#pragma unroll
      for (int w = 0; w < kWarpsN; ++w) mx = fmaxf(mx, red_ml[w * 16 + r].x);
      // A split part may hold no key of a row (its own position lies in another part).
      const float b = mx == -INFINITY ? 0.0f : mx;
      float sum = 0.0f;
      float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int w = 0; w < kWarpsN; ++w) {
        const float2 ml = red_ml[w * 16 + r];
        const float e = exp2f(ml.x - b);
        const float4 ow = *reinterpret_cast<const float4*>(red_o + (w * 16 + r) * kStride + c4);
        sum += ml.y * e;
        acc.x += ow.x * e;
        acc.y += ow.y * e;
        acc.z += ow.z * e;
        acc.w += ow.w * e;
      }
      if (split) {
        *reinterpret_cast<float4*>(tp.partial_o + (item + r) * D + c4) = acc;
        if (c4 == 0) tp.partial_ml[item + r] = make_float2(mx, sum);
      } else {
        const float inv = 1.0f / sum;
        *reinterpret_cast<uint2*>(out + row_offset(r) + c4) = make_uint2(
            pack_bf16x2(acc.x * inv, acc.y * inv), pack_bf16x2(acc.z * inv, acc.w * inv));
      }
    }
    if (split) {
      // Publish this part and count it; the tile's last part to arrive merges all of them and
      // resets the counter for the next launch.
      __shared__ int is_last;
      __threadfence();
      __syncthreads();
      if (tid == 0) is_last = atomicAdd(tp.counters + tile_index, 1) == num_parts - 1;
      __syncthreads();
      if (is_last) {
        __threadfence();
        merge_parts<D, Shape::kThreads>(
            tp, first_item, num_parts, rows,
            reinterpret_cast<float*>(smem + Shape::kQBytes + Shape::kStatesBytes), row_offset);
        if (tid == 0) tp.counters[tile_index] = 0;
      }
    }
  }
}

// ---- host side ---------------------------------------------------------------------------

template <int D, int kWarps, int kStages, bool kWgmma>
void launch_prefill(const TileParams& tp, cudaStream_t stream) {
  using Prefill = TileShape<D, kWarps, 1, kStages>;
  const PagedAttentionParams& p = tp.p;
  const int64_t tokens = p.num_tokens, seqs = p.num_seqs, g = tp.group;
  // A prefill sequence has at least 16 / g + 1 new tokens, so at most T / (16 / g + 1)
  // sequences are; the sum over them of ceil(n g / rows) is at most this bound.
  const int64_t prefill_seqs = std::min<int64_t>(seqs, tokens / (kDecodeRows / g + 1));
  const int64_t tiles = (tokens * g + (Prefill::kRows - 1) * prefill_seqs) / Prefill::kRows;
  INFLIGHT_CHECK(tiles <= cuda::kMaxGridX, "paged_attention_cuda: {} tiles exceed the grid", tiles);
  constexpr auto kKernel = paged_attention_tile_kernel<D, kWarps, 1, kStages, kWgmma>;
  allow_dynamic_smem<kKernel, Prefill::kSmemBytes>();
  const dim3 grid =
      tp.kh_fastest ? dim3(static_cast<unsigned>(tiles * p.kv.num_kv_heads))
                    : dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(p.kv.num_kv_heads));
  kKernel<<<grid, Prefill::kThreads, Prefill::kSmemBytes, stream>>>(tp);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

// Plans and enqueues the tile kernels for a validated bf16 problem with head_dim D: a decode
// launch when GQA allows decode tiles, and a prefill launch when some sequence may have
// n * g > 16. Sizes come from host-side bounds only (num_tokens, num_seqs, max_context_len);
// no device memory is read.
//   kPrefillRows    64 or 128 rows per prefill tile; 0: 128 when the longest possible prefill
//                   alone fills two CTAs per SM with them, else 64
//   kPrefillStages, kDecodeStages   K/V stages in flight
//   kWgmma          prefill by wgmma where the binary has sm_90a code
template <int D, int kPrefillRows, int kPrefillStages, int kDecodeStages, bool kWgmma>
void launch_tiles(const PagedAttentionParams& p, cudaStream_t stream, bool kh_fastest = false) {
  using Decode = TileShape<D, 1, 4, kDecodeStages>;
  TileParams tp;
  tp.p = p;
  tp.kh_fastest = kh_fastest;
  tp.group = p.num_heads / p.kv.num_kv_heads;
  tp.scale_log2 = p.scale * kLog2e;
  const int64_t tokens = p.num_tokens, seqs = p.num_seqs, kv_heads = p.kv.num_kv_heads;
  const int64_t g = tp.group;
  INFLIGHT_CHECK(seqs <= cuda::kMaxGridYZ && kv_heads <= cuda::kMaxGridYZ,
                 "paged_attention_cuda: {} sequences x {} kv heads exceed the grid", seqs,
                 kv_heads);
  const int sms = num_sms();

  if (g <= kDecodeRows) {
    // Split-KV when (sequences x kv heads) would leave SMs idle: about two CTAs per SM.
    const int64_t ctas = seqs * kv_heads;
    if (ctas < sms && ctas <= kMaxSplitTiles && p.max_context_len > 0) {
      const int64_t range =
          p.sliding_window > 0
              ? std::min<int64_t>(p.max_context_len, p.sliding_window + kDecodeRows - 1)
              : p.max_context_len;
      const int64_t target = std::min<int64_t>(kMaxParts, (2 * sms + ctas - 1) / ctas);
      const int64_t part_len =
          std::max<int64_t>(kMinPartLen, ((range + target - 1) / target + 63) / 64 * 64);
      const int64_t parts = (range + part_len - 1) / part_len;
      if (parts > 1) {
        const int64_t items = ctas * parts * kDecodeRows;
        const SplitWorkspace ws =
            split_workspace(stream, items * static_cast<int64_t>(D * sizeof(float) + 8));
        if (ws.data != nullptr) {
          tp.part_len = static_cast<int32_t>(part_len);
          tp.max_parts = static_cast<int32_t>(parts);
          tp.partial_o = ws.data;
          tp.partial_ml = reinterpret_cast<float2*>(ws.data + items * D);
          tp.counters = ws.counters;
        }
      }
    }
    constexpr auto kKernel = paged_attention_tile_kernel<D, 1, 4, kDecodeStages, false>;
    allow_dynamic_smem<kKernel, Decode::kSmemBytes>();
    const dim3 grid(tp.max_parts, static_cast<unsigned>(seqs), static_cast<unsigned>(kv_heads));
    kKernel<<<grid, Decode::kThreads, Decode::kSmemBytes, stream>>>(tp);
  }

  // Every sequence has at least one new token, so the longest has at most T - S + 1.
  const int64_t max_new = tokens - seqs + 1;
  if (max_new * g > kDecodeRows) {
    const bool tall = kPrefillRows == 128 ||
                      (kPrefillRows == 0 && (max_new * g + 127) / 128 * kv_heads >= 2 * sms);
    if (tall) {
      launch_prefill<D, 8, kPrefillStages, kWgmma>(tp, stream);
    } else {
      launch_prefill<D, 4, kPrefillStages, kWgmma>(tp, stream);
    }
  }
}

}  // namespace inflight::lab::v4
