// Tiled paged attention on tensor cores: the fast path of paged_attention_cuda for head_dim 64
// and 128 on sm_80+ (mma.sync m16n8k16 bf16, ldmatrix, cp.async; on sm_90a the prefill tiles
// use wgmma instead of mma.sync; see attention_mma.cuh).
//
// Rows. For sequence s with n new tokens and kv head kh, the g = H / KH query heads of its new
// tokens form the row space R = i * g + j (token i, query head kh * g + j), 0 <= R < n * g. A
// tile is a range of rows of one (sequence, kv head): every row reads the same K/V, so one K/V
// tile in shared memory serves the whole GQA group. Row R attends to keys [lo(p), p] of its
// sequence, p = context_len - n + i its position (paged_attention.h). With ALiBi slopes, row R's
// raw scores gain slopes[h] / scale * (key - p) before the mask and the softmax.
//
// Two kinds of tile, one kernel template (kWarpsM row warps x kWarpsN key warps, 16 rows each):
//  - prefill tiles, kWarpsM x 1: 16 * kWarpsM rows; each warp takes 16 rows against all the
//    stage's 64 keys. Sequences with n * g > 16 (prefill, chunked prefill).
//  - decode tiles, 1 x kWarpsN: the 16 rows of a sequence with n * g <= 16 (decode; short
//    chunks at small GQA ratios); the warps share out each stage's keys, 16 each, and merge
//    their softmax states at the end. A long key range may be cut into parts run by separate
//    CTAs (split-KV) that leave (max, sum, unnormalised output) in a workspace; the last CTA
//    of a tile to finish (a per-tile counter) merges the parts and resets the counter.
// Per stage, K and V rows of the tile's keys are gathered through the block table with 16-byte
// cp.async copies (any page size) into 128-byte-swizzled shared memory, kStages deep. An e4m3
// cache (kFp8) is staged as e4m3 rows and their scales instead, kStages deep: prefill tiles widen
// each block's stage into one bf16 K/V tile (value * scale, rounded to bf16) before their MMAs;
// decode tiles multiply the e4m3 rows as f16 straight from the stage, the scales applied to the
// scores and to P (attention_e4m3_mma.cuh). Scores, the online softmax (log2 domain) and the
// output accumulators are fp32 in registers; P goes back into the tensor cores as bf16 (f16
// over e4m3 in decode tiles) straight from the score registers.
#pragma once

#include <cstdint>

#include "ops/attention_e4m3_mma.cuh"
#include "ops/attention_kv_stage.cuh"
#include "ops/attention_tile_params.cuh"

namespace inflight::attention {

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
// launch wrote them). item: the tile's first partial row; row_norm: shared [16] (M, 1 / sum),
// each part's weight is recomputed from its m_p where it is applied.
template <int D, int kThreads, class RowOffset>
__device__ void merge_parts(const TileParams& tp, int64_t item, int32_t num_parts, int32_t rows,
                            float2* row_norm, RowOffset row_offset) {
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
      sum += ml.y * exp2f(ml.x - mx);
    }
    sum = cuda::warp_sum(sum);
    if (lane == 0) row_norm[r] = make_float2(mx, 1.0f / sum);
  }
  __syncthreads();
  auto* out = static_cast<bf16*>(tp.p.out);
  for (int i = threadIdx.x; i < rows * (D / 4); i += kThreads) {
    const int r = i / (D / 4), c4 = (i % (D / 4)) * 4;
    const float2 norm = row_norm[r];
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int pi = 0; pi < num_parts; ++pi) {
      const float w = exp2f(__ldcg(tp.partial_ml + item + pi * kDecodeRows + r).x - norm.x);
      const float4 v = __ldcg(
          reinterpret_cast<const float4*>(tp.partial_o + (item + pi * kDecodeRows + r) * D + c4));
      acc.x += w * v.x;
      acc.y += w * v.y;
      acc.z += w * v.z;
      acc.w += w * v.w;
    }
    *reinterpret_cast<uint2*>(out + row_offset(r) + c4) = make_uint2(
        pack_bf16x2(acc.x * norm.y, acc.y * norm.y), pack_bf16x2(acc.z * norm.y, acc.w * norm.y));
  }
}

template <int N>
__device__ __forceinline__ float (&quad(float (&a)[N], int i))[4] {
  return *reinterpret_cast<float(*)[4]>(&a[4 * i]);
}

// CTAs per SM that shared memory allows and registers must not prevent: two 8-warp wgmma
// prefill CTAs (<= 128 registers a thread), three 2-stage decode CTAs (<= 168), four over an
// e4m3 cache (no bf16 tile: ~40 KB of shared memory; <= 128 registers), three with 3 stages.
template <int kWarpsM, int kWarpsN, int kStages, bool kWgmma, bool kFp8>
constexpr int tile_min_blocks() {
  if (kWarpsM == 1 && kFp8) return (kStages == 2 ? 4 : 3) * 4 / kWarpsN;
  if (kWarpsM == 1) return (kStages == 2 ? 3 : 1) * 4 / kWarpsN;
  return kWgmma && kHasWgmma && kWarpsM == 8 && kStages == 2 ? 2 : 1;
}

// Grid: decode tiles (max_parts, S, KH), CTAs past a sequence's parts or on a prefill sequence
// exit; prefill tiles (upper bound on tiles x KH) with the kv head fastest, so that the longest
// tile of every kv head starts in the first wave (longest first over the whole grid for one
// sequence), CTAs past the last tile exit. kWgmma (prefill tiles; in effect only where the
// sm_90a pass compiles it) computes S = Q K^T and O += P V by warpgroup wgmma with Q, K and V
// read from shared memory by the tensor cores, instead of per-warp mma.sync fed by ldmatrix;
// everything else is shared.
template <int D, int kWarpsM, int kWarpsN, int kStages, bool kWgmma, bool kFp8 = false>
__global__ void __launch_bounds__(TileShape<D, kWarpsM, kWarpsN, kStages, kFp8>::kThreads,
                                  tile_min_blocks<kWarpsM, kWarpsN, kStages, kWgmma, kFp8>())
    paged_attention_tile_kernel(TileParams tp) {
  cuda::pdl_launch_dependents();  // see ops_cuda.cuh: launched with PDL
  cuda::pdl_wait();
  using Shape = TileShape<D, kWarpsM, kWarpsN, kStages, kFp8>;
  constexpr bool kDecode = Shape::kDecode;
  constexpr bool kUseWgmma = kWgmma && !kDecode && kHasWgmma;
  constexpr bool kE4m3Mma = kFp8 && kDecode;  // MMAs on the e4m3 stage (no bf16 tile)
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
    const int32_t kv_heads = p.kv.num_kv_heads;
    int32_t tile = 0;
    if (!find_prefill_tile<Shape::kRows, Shape::kThreads>(tp, blockIdx.x / kv_heads, seq, tile)) {
      return;
    }
    r0 = tile * Shape::kRows;
    kh = blockIdx.x % kv_heads;
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
  const uint32_t sv_addr = sk_addr + Shape::kTileStages * Shape::kStageBytes;
  // e4m3: the byte offset of block b's stage (K rows, V rows, K scales, V scales), its scales.
  auto fp8_stage = [&](int32_t b) {
    return Shape::kQBytes + 2 * Shape::kTileStages * Shape::kStageBytes +
           (b % kStages) * 2 * (Shape::kFp8StageBytes + kKeys * 4);
  };
  auto fp8_scales = [&](int32_t b) {
    return reinterpret_cast<const float*>(smem + fp8_stage(b) + 2 * Shape::kFp8StageBytes);
  };
  const int32_t num_heads = p.num_heads;
  // Global element offset of row r of the tile in q / out ([T, H, D]).
  auto row_offset = [&](int r) {
    const int32_t row = r0 + r;
    return (static_cast<int64_t>(q0 + row / g) * num_heads + kh * g + row % g) * D;
  };
  const auto gk = kv_gather<Shape>(tp, seq, kh);
  // Stages block b's keys (into stage b % kStages).
  auto load_block = [&](int32_t b) {
    const int32_t kb = keys.lo + b * kKeys;
    if constexpr (kFp8) {
      load_kv_stage_fp8<Shape>(gk, kb, keys.hi, sq_addr + fp8_stage(b));
    } else {
      const uint32_t off = (b % kStages) * Shape::kStageBytes;
      load_kv_stage<Shape>(gk, kb, keys.hi, sk_addr + off, sv_addr + off);
    }
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
    if (b < num_blocks) load_block(b);
    cp_async_commit();  // one group per block, empty or not: the waits below count groups
  }

  // This thread's two fragment rows (g, g + 8 of its row warp), clamped to the last valid row,
  // and the keys each may read within this tile's range.
  // With ALiBi, each row's slope over the scale (the bias in raw score units) and position.
  int32_t row_lo[2], row_hi[2], row_pos[2];
  float row_slope[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = min(warp_m * 16 + lane / 4 + 8 * h, rows - 1);
    const int32_t pos = ctx - n + (r0 + r) / g;
    row_lo[h] = p.sliding_window > 0 ? max(0, pos - p.sliding_window + 1) : 0;
    row_hi[h] = min(pos, keys.hi);
    row_pos[h] = pos;
    row_slope[h] =
        p.alibi_slopes != nullptr ? p.alibi_slopes[kh * g + (r0 + r) % g] / p.scale : 0.0f;
  }
  // Stage keys [kb, kb + kKeys) need no mask when kb >= the last row's lo and kb + kKeys - 1
  // <= the first row's hi (lo and hi grow with the row): all blocks but those at the diagonal,
  // the window's start, or a split part's end. CTA-uniform.
  const int32_t first_pos = ctx - n + r0 / g, last_pos = ctx - n + (r0 + rows - 1) / g;
  const int32_t full_lo = p.sliding_window > 0 ? max(0, last_pos - p.sliding_window + 1) : 0;
  const int32_t full_hi = min(first_pos, keys.hi) - (kKeys - 1);

  // o[4 dt + e]: the mma C fragment of output columns 8 dt .. 8 dt + 7. m: running row max of
  // the scaled scores (log2 domain), l: this lane's part of the row sum.
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  uint32_t qf[kUseWgmma || kE4m3Mma ? 1 : D / 16][4];  // Q A fragments (bf16 mma.sync only)
  // wgmma descriptors: this warpgroup's 64 rows of Q, and stage 0 of K (K-major, 128-byte
  // swizzle, 8-row groups 1024 B apart). The warpgroup index goes through a shuffle so that the
  // compiler sees it warp-uniform and keeps the descriptors in uniform registers.
  const int wg = __shfl_sync(0xffffffffu, warp / 4, 0);
  const uint32_t q_desc = wgmma_desc_lo(sq_addr + wg * 64 * 128, 0);
  const uint32_t k_desc = wgmma_desc_lo(sk_addr, 0);
  constexpr uint32_t kDescHi = wgmma_desc_hi(1024);

  // One block of kKeys keys; kMasked: apply the row ranges to the scores.
  auto block = [&](int32_t j, auto masked) {
    constexpr bool kMasked = decltype(masked)::value;
    [[maybe_unused]] const int stage = j % (kE4m3Mma ? 1 : Shape::kTileStages);  // bf16 tiles
    const int kw0 = warp_n * kWarpKeys;  // this warp's first key row in the stage
    const int32_t kb = keys.lo + j * kKeys + kw0;

    // S = Q K^T over this warp's kWarpKeys keys: [16 rows, kWarpKeys] as kNt n8 tiles,
    // s[4 nt + e] (raw scores).
    float s[kNt * 4];
#pragma unroll
    for (int i = 0; i < kNt * 4; ++i) s[i] = 0.0f;
    if constexpr (kE4m3Mma) {
      static_assert(kNt == 2, "e4m3 decode warps take 16 keys");
      e4m3_scores<D>(s, sq, sq_addr + fp8_stage(j), kw0);
      const float* ks_row = fp8_scales(j) + kw0 + 2 * (lane % 4);
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
        const float2 ks = *reinterpret_cast<const float2*>(ks_row + nt * 8);
        s[4 * nt + 0] *= ks.x;
        s[4 * nt + 1] *= ks.y;
        s[4 * nt + 2] *= ks.x;
        s[4 * nt + 3] *= ks.y;
      }
    } else if constexpr (kUseWgmma) {
      const uint32_t kd = k_desc + ((stage * Shape::kStageBytes) >> 4);
      fence_registers(s);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        // k16 step kk: slab kk / 4, 32 bytes into its 128-byte rows per step.
        const uint32_t qa = q_desc + (((kk / 4) * Shape::kRows * 128 + (kk % 4) * 32) >> 4);
        const uint32_t ka = kd + (((kk / 4) * kKeys * 128 + (kk % 4) * 32) >> 4);
        wgmma_m64n64k16_ss(s, wgmma_desc_join(qa, kDescHi), wgmma_desc_join(ka, kDescHi));
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(s);
    } else {
      const uint32_t wk = sk_addr + stage * Shape::kStageBytes;
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

    // ALiBi: + slope / scale * (key - pos), so that the scaled score gains slope * (key - pos).
    if (p.alibi_slopes != nullptr) {
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int32_t key = kb + nt * 8 + 2 * (lane % 4) + (e % 2);
          const int h = e / 2;
          s[4 * nt + e] += row_slope[h] * static_cast<float>(key - row_pos[h]);
        }
      }
    }
    if constexpr (kMasked) {
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int32_t key = kb + nt * 8 + 2 * (lane % 4) + (e % 2);
          const int h = e / 2;
          if (key < row_lo[h] || key > row_hi[h]) s[4 * nt + e] = -INFINITY;
        }
      }
    }

    // Online softmax in the log2 domain: per row, the new max over the 4 lanes of the quad
    // (scaled: scale_log2 > 0 commutes with max), rescale o and l when it moved, then
    // p = 2^(s scale_log2 - max) as one FFMA and one ex2.
    float base[2], correction[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
        mx = fmaxf(mx, fmaxf(s[4 * nt + 2 * h], s[4 * nt + 2 * h + 1]));
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[h], mx * tp.scale_log2);
      base[h] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet stays at 0
      correction[h] = exp2_approx(m[h] - base[h]);
      m[h] = m_new;
      l[h] *= correction[h];
    }
    // The max of most rows settles after the first blocks: skip the rescale when no row of the
    // warp moved (warp-uniform branch).
    if (__any_sync(0xffffffffu, correction[0] != 1.0f || correction[1] != 1.0f)) {
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[4 * dt + 0] *= correction[0];
        o[4 * dt + 1] *= correction[0];
        o[4 * dt + 2] *= correction[1];
        o[4 * dt + 3] *= correction[1];
      }
    }
#pragma unroll
    for (int i = 0; i < kNt * 4; ++i) {
      const int h = (i % 4) / 2;
      s[i] = exp2_approx(fmaf(s[i], tp.scale_log2, -base[h]));
      l[h] += s[i];  // this lane's part of the row sum; the quad is summed at the end
    }

    // O += P V, P from the score registers (two n8 C tiles = one k16 A fragment).
    if constexpr (kE4m3Mma) {
      const float* vs = fp8_scales(j) + kKeys + kw0 + 2 * (lane % 4);
      const float2 v0 = *reinterpret_cast<const float2*>(vs);
      const float2 v1 = *reinterpret_cast<const float2*>(vs + 8);
      const float w[4] = {v0.x * kPScale, v0.y * kPScale, v1.x * kPScale, v1.y * kPScale};
      const uint32_t a[4] = {
          pack_f16x2_sat(s[0] * w[0], s[1] * w[1]), pack_f16x2_sat(s[2] * w[0], s[3] * w[1]),
          pack_f16x2_sat(s[4] * w[2], s[5] * w[3]), pack_f16x2_sat(s[6] * w[2], s[7] * w[3])};
      e4m3_pv<D>(o, a, sq_addr + fp8_stage(j) + Shape::kFp8StageBytes, kw0);
    } else {
      const uint32_t wv = sv_addr + stage * Shape::kStageBytes;
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
            ldmatrix_x4_trans(
                b, wv + tile_offset<kKeys>(kw0 + kk * 16 + ((lane / 8) % 2) * 8 + lane % 8,
                                           dp * 2 + lane / 16));
            mma_bf16(quad(o, 2 * dp), a[kk], b[0], b[1]);
            mma_bf16(quad(o, 2 * dp + 1), a[kk], b[2], b[3]);
          }
        }
      }
    }
  };

  for (int32_t j = 0; j < num_blocks; ++j) {
    // Block j + kStages - 1 goes into the stage that iteration j - 1 consumed. Prefill: after
    // the barrier that also frees that stage (one barrier per block; K/V mostly come from L2).
    // Decode: before waiting for block j, so that kStages blocks are in flight meanwhile
    // (bandwidth-bound), and a second barrier at the end frees the stage.
    const int32_t next = j + kStages - 1;
    if constexpr (kDecode) {
      if (next < num_blocks) load_block(next);
      cp_async_commit();
      cp_async_wait<kStages - 1>();  // block j (and Q) have landed
    } else {
      cp_async_wait<kStages - 2>();  // block j (and Q) have landed
      if constexpr (kUseWgmma) fence_proxy_async();
    }
    __syncthreads();
    if constexpr (!kDecode) {
      if (next < num_blocks) load_block(next);
      cp_async_commit();
    }
    if constexpr (kE4m3Mma) {
      if (j == 0) e4m3_q_fragments<D, Shape::kRows, Shape::kThreads>(sq);  // Q has landed
    }
    if constexpr (kFp8 && !kDecode) {
      // The barrier above: block j's stage has landed and every warp is done with the bf16
      // tile (block j - 1). Widen, then make the stores visible (to wgmma's async proxy too).
      widen_kv_stage<Shape>(smem + fp8_stage(j), smem + Shape::kQBytes,
                            smem + Shape::kQBytes + Shape::kStageBytes);
      if constexpr (kUseWgmma) fence_proxy_async();
      __syncthreads();
    }
    const int32_t kb = keys.lo + j * kKeys;
    if (kb >= full_lo && kb <= full_hi) {
      block(j, std::false_type{});
    } else {
      block(j, std::true_type{});
    }
    if constexpr (kDecode) __syncthreads();  // the stage is free for the load kStages - 1 on
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
    if constexpr (kE4m3Mma) {
#pragma unroll
      for (int q = 0; q < D / 16; ++q) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = lane / 4 + 8 * h;
          float4 v = e4m3_o_dims<D>(o, q, h);
          v.x *= 1.0f / kPScale;
          v.y *= 1.0f / kPScale;
          v.z *= 1.0f / kPScale;
          v.w *= 1.0f / kPScale;
          *reinterpret_cast<float4*>(red_o + (warp_n * 16 + r) * kStride + q * 16 +
                                     4 * (lane % 4)) = v;
        }
      }
    } else {
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = lane / 4 + 8 * h;
          *reinterpret_cast<float2*>(red_o + (warp_n * 16 + r) * kStride + dt * 8 +
                                     2 * (lane % 4)) =
              make_float2(o[4 * dt + 2 * h], o[4 * dt + 2 * h + 1]);
        }
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
            reinterpret_cast<float2*>(smem + Shape::kQBytes + Shape::kStatesBytes), row_offset);
        if (tid == 0) tp.counters[tile_index] = 0;
      }
    }
  }
}

}  // namespace inflight::attention
