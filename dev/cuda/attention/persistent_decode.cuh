// Lab: persistent decode tiles over an e4m3 cache (NOTES.md item 8). The engine's decode tiles
// (src/ops/attention_tile.cuh) give each (sequence, kv head) its own CTA, and at 1,024 sequences
// of ~160 keys a CTA's ~11.5 us is a chain of memory round trips (metadata, block table, first
// stage, the stages after it, the cross-warp merge) that more CTAs per SM do not shorten. Here a
// grid of as many CTAs as fit walks the items (sequence, kv head) in turn, CTA c taking items
// c, c + grid, ..., and its cp.async ring runs on across them: the work list is the
// concatenation of the items' key blocks, the producer issues block b + kStages - 1 while block
// b is consumed whatever item each belongs to, and an item's Q rows travel in the commit group
// of its first block into a ring of kStages Q slots (at most kStages items own the blocks in
// flight). The cross-warp merge has its own shared memory, since the stages are in flight
// during it. No split-KV (meant for grids of several waves), no sliding-window-free shortcut:
// the masks, windows and ALiBi of the engine's tiles apply. Decode sequences only
// (n * g <= 16); others are skipped (the engine's prefill tiles would take them).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ops/attention_tile_launch.cuh"

namespace inflight::lab {

using attention::kDecodeRows;
using attention::KeyRange;
using attention::TileParams;

template <int D, int kWarps, int kStages>
struct PersistentShape {
  using Tile = attention::TileShape<D, 1, kWarps, kStages, /*kFp8=*/true>;
  static constexpr int kThreads = Tile::kThreads;
  static constexpr int kKeys = Tile::kKeys;                                   // 16 a warp
  static constexpr int kQBytes = Tile::kQBytes;                               // 16 bf16 rows
  static constexpr int kStageBytes = 2 * (Tile::kFp8StageBytes + kKeys * 4);  // K, V, scales
  static constexpr int kOStride = D + 4;
  static constexpr int kRingOffset = kStages * kQBytes;
  static constexpr int kMergeOffset = kRingOffset + kStages * kStageBytes;
  static constexpr int kMergeBytes = kWarps * 16 * (kOStride * 4 + 8);
  static constexpr int kSmemBytes = kMergeOffset + kMergeBytes + 1024;
  // CTAs an SM that shared memory allows (227 KB), at most 8: registers may use the rest.
  static constexpr int kMinBlocks = 232448 / kSmemBytes < 8 ? 232448 / kSmemBytes : 8;
  static_assert(kStageBytes % 128 == 0, "stages keep the e4m3 swizzle's 128-byte alignment");
};

// One work item: a decode sequence's rows of one kv head. num_blocks == 0: past the last.
struct PersistentItem {
  int32_t index = 0, seq = 0, kh = 0, q0 = 0, n = 0, ctx = 0, rows = 0, num_blocks = 0;
  KeyRange keys{0, -1};
};

// The first decode item at or after `index` in steps of `stride` (items are seq-fastest).
template <int kKeys>
__device__ __forceinline__ PersistentItem persistent_item(const TileParams& tp, int32_t index,
                                                          int32_t stride) {
  const PagedAttentionParams& p = tp.p;
  const int32_t seqs = p.num_seqs, items = seqs * p.kv.num_kv_heads;
  PersistentItem it;
  for (; index < items; index += stride) {
    const int32_t seq = index % seqs;
    const int32_t q0 = p.query_start[seq], n = p.query_start[seq + 1] - q0;
    if (!attention::is_decode_seq(n, tp.group)) continue;
    it.seq = seq;
    it.kh = index / seqs;
    it.q0 = q0;
    it.n = n;
    it.ctx = p.context_lens[seq];
    it.rows = n * tp.group;
    it.keys = attention::token_keys(p.sliding_window, it.ctx, n, 0, (it.rows - 1) / tp.group);
    it.num_blocks = (it.keys.hi - it.keys.lo + kKeys) / kKeys;
    break;
  }
  it.index = index;
  return it;
}

template <int D, int kWarps, int kStages>
__global__ void __launch_bounds__(32 * kWarps, (PersistentShape<D, kWarps, kStages>::kMinBlocks))
    persistent_decode_kernel(TileParams tp) {
  using PS = PersistentShape<D, kWarps, kStages>;
  using Tile = typename PS::Tile;
  using namespace attention;
  constexpr int kKeys = PS::kKeys;
  cuda::pdl_launch_dependents();
  cuda::pdl_wait();
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_addr = smem_addr(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  const uint32_t base = smem_addr(smem);
  const PagedAttentionParams& p = tp.p;
  const int32_t g = tp.group, stride = static_cast<int32_t>(gridDim.x);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  auto q_slot = [&](int32_t ordinal) { return (ordinal % kStages) * PS::kQBytes; };
  auto stage = [&](int32_t block) { return PS::kRingOffset + (block % kStages) * PS::kStageBytes; };

  // ---- producer: the next block of the work list into the ring, one commit group each ----
  PersistentItem pi = persistent_item<kKeys>(tp, blockIdx.x, stride);
  if (pi.num_blocks == 0) return;  // no item for this CTA (nothing in flight yet)
  auto pgk = kv_gather<Tile>(tp, pi.seq, pi.kh);
  int32_t pb = 0, produced = 0, p_ordinal = 0;
  const auto* q = static_cast<const bf16*>(p.q);
  const int32_t num_heads = p.num_heads;
  auto produce = [&] {
    if (pi.num_blocks > 0) {
      if (pb == 0) {  // the item's 16 Q rows (zero past its rows), with its first block
        const uint32_t sq = base + q_slot(p_ordinal);
        for (int i = tid; i < kDecodeRows * Tile::kChunks; i += PS::kThreads) {
          const int r = i / Tile::kChunks, c = i % Tile::kChunks;
          const bool valid = r < pi.rows;
          const int64_t off =
              (static_cast<int64_t>(pi.q0 + r / g) * num_heads + pi.kh * g + r % g) * D + c * 8;
          cp_async_16(sq + tile_offset<kDecodeRows>(r, c), valid ? q + off : q, valid);
        }
      }
      load_kv_stage_fp8<Tile>(pgk, pi.keys.lo + pb * kKeys, pi.keys.hi, base + stage(produced));
      ++produced;
      if (++pb == pi.num_blocks) {
        pi = persistent_item<kKeys>(tp, pi.index + stride, stride);
        pb = 0;
        ++p_ordinal;
        if (pi.num_blocks > 0) pgk = kv_gather<Tile>(tp, pi.seq, pi.kh);
      }
    }
    cp_async_commit();  // one group per call, empty or not: the wait below counts groups
  };
#pragma unroll
  for (int b = 0; b < kStages - 1; ++b) produce();

  // ---- consumer: the item being computed ----
  PersistentItem ci = persistent_item<kKeys>(tp, blockIdx.x, stride);
  int32_t cb = 0, consumed = 0, c_ordinal = 0;
  float o[D / 2], m[2], l[2];
  int32_t row_lo[2], row_hi[2], row_pos[2], full_lo = 0, full_hi = 0;
  float row_slope[2];
  auto begin_item = [&] {
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[h] = -INFINITY;
      l[h] = 0.0f;
      const int r = min(lane / 4 + 8 * h, ci.rows - 1);
      const int32_t pos = ci.ctx - ci.n + r / g;
      row_lo[h] = p.sliding_window > 0 ? max(0, pos - p.sliding_window + 1) : 0;
      row_hi[h] = min(pos, ci.keys.hi);
      row_pos[h] = pos;
      row_slope[h] = p.alibi_slopes != nullptr ? p.alibi_slopes[ci.kh * g + r % g] / p.scale : 0.0f;
    }
    const int32_t first_pos = ci.ctx - ci.n, last_pos = ci.ctx - ci.n + (ci.rows - 1) / g;
    full_lo = p.sliding_window > 0 ? max(0, last_pos - p.sliding_window + 1) : 0;
    full_hi = min(first_pos, ci.keys.hi) - (kKeys - 1);
  };
  begin_item();

  // One block of the current item from its stage (the engine's e4m3 decode block).
  auto block = [&](uint32_t s8, const unsigned char* qf, auto masked) {
    constexpr bool kMasked = decltype(masked)::value;
    const int kw0 = warp * 16;
    const int32_t kb = ci.keys.lo + cb * kKeys + kw0;
    const auto* scales =
        reinterpret_cast<const float*>(smem + (s8 - base) + 2 * Tile::kFp8StageBytes);
    float s[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i] = 0.0f;
    e4m3_scores<D>(s, qf, s8, kw0);
    const float* ks_row = scales + kw0 + 2 * (lane % 4);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const float2 ks = *reinterpret_cast<const float2*>(ks_row + nt * 8);
      s[4 * nt + 0] *= ks.x;
      s[4 * nt + 1] *= ks.y;
      s[4 * nt + 2] *= ks.x;
      s[4 * nt + 3] *= ks.y;
    }
    if (p.alibi_slopes != nullptr) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int32_t key = kb + nt * 8 + 2 * (lane % 4) + (e % 2);
          s[4 * nt + e] += row_slope[e / 2] * static_cast<float>(key - row_pos[e / 2]);
        }
      }
    }
    if constexpr (kMasked) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int32_t key = kb + nt * 8 + 2 * (lane % 4) + (e % 2);
          if (key < row_lo[e / 2] || key > row_hi[e / 2]) s[4 * nt + e] = -INFINITY;
        }
      }
    }
    float base_h[2], correction[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = fmaxf(fmaxf(s[2 * h], s[2 * h + 1]), fmaxf(s[4 + 2 * h], s[4 + 2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[h], mx * tp.scale_log2);
      base_h[h] = m_new == -INFINITY ? 0.0f : m_new;
      correction[h] = exp2_approx(m[h] - base_h[h]);
      m[h] = m_new;
      l[h] *= correction[h];
    }
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
    for (int i = 0; i < 8; ++i) {
      const int h = (i % 4) / 2;
      s[i] = exp2_approx(fmaf(s[i], tp.scale_log2, -base_h[h]));
      l[h] += s[i];
    }
    const float* vs = scales + kKeys + kw0 + 2 * (lane % 4);
    const float2 v0 = *reinterpret_cast<const float2*>(vs);
    const float2 v1 = *reinterpret_cast<const float2*>(vs + 8);
    const float w[4] = {v0.x * kPScale, v0.y * kPScale, v1.x * kPScale, v1.y * kPScale};
    const uint32_t a[4] = {
        pack_f16x2_sat(s[0] * w[0], s[1] * w[1]), pack_f16x2_sat(s[2] * w[0], s[3] * w[1]),
        pack_f16x2_sat(s[4] * w[2], s[5] * w[3]), pack_f16x2_sat(s[6] * w[2], s[7] * w[3])};
    e4m3_pv<D>(o, a, s8 + Tile::kFp8StageBytes, kw0);
  };

  // The item's end: the key warps' states merged in the merge area, rows written out.
  auto finish_item = [&] {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
    float* red_o = reinterpret_cast<float*>(smem + PS::kMergeOffset);  // [kWarps, 16, stride]
    auto* red_ml = reinterpret_cast<float2*>(red_o + kWarps * 16 * PS::kOStride);
#pragma unroll
    for (int qd = 0; qd < D / 16; ++qd) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float4 v = e4m3_o_dims<D>(o, qd, h);
        v.x *= 1.0f / kPScale;
        v.y *= 1.0f / kPScale;
        v.z *= 1.0f / kPScale;
        v.w *= 1.0f / kPScale;
        *reinterpret_cast<float4*>(red_o + (warp * 16 + lane / 4 + 8 * h) * PS::kOStride + qd * 16 +
                                   4 * (lane % 4)) = v;
      }
    }
    if (lane % 4 == 0) {
      red_ml[warp * 16 + lane / 4] = make_float2(m[0], l[0]);
      red_ml[warp * 16 + lane / 4 + 8] = make_float2(m[1], l[1]);
    }
    __syncthreads();
    auto* out = static_cast<bf16*>(p.out);
    for (int i = tid; i < ci.rows * (D / 4); i += PS::kThreads) {
      const int r = i / (D / 4), c4 = (i % (D / 4)) * 4;
      float mx = -INFINITY;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, red_ml[w * 16 + r].x);
      float sum = 0.0f;
      float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float2 ml = red_ml[w * 16 + r];
        const float e = exp2f(ml.x - mx);  // mx is finite: the row's own key is in the item
        const float4 ow =
            *reinterpret_cast<const float4*>(red_o + (w * 16 + r) * PS::kOStride + c4);
        sum += ml.y * e;
        acc.x += ow.x * e;
        acc.y += ow.y * e;
        acc.z += ow.z * e;
        acc.w += ow.w * e;
      }
      const float inv = 1.0f / sum;
      const int64_t row =
          (static_cast<int64_t>(ci.q0 + r / g) * num_heads + ci.kh * g + r % g) * D + c4;
      *reinterpret_cast<uint2*>(out + row) =
          make_uint2(pack_bf16x2(acc.x * inv, acc.y * inv), pack_bf16x2(acc.z * inv, acc.w * inv));
    }
    // The next write of the merge area is an item later, past the barriers of its blocks.
  };

  while (true) {
    produce();                     // block consumed + kStages - 1, into the stage freed last
    cp_async_wait<kStages - 1>();  // block `consumed` (and, at an item's start, its Q) landed
    __syncthreads();
    unsigned char* qf = smem + q_slot(c_ordinal);
    if (cb == 0) e4m3_q_fragments<D, kDecodeRows, PS::kThreads>(qf);
    const uint32_t s8 = base + stage(consumed);
    const int32_t kb = ci.keys.lo + cb * kKeys;
    if (kb >= full_lo && kb <= full_hi) {
      block(s8, qf, std::false_type{});
    } else {
      block(s8, qf, std::true_type{});
    }
    __syncthreads();  // the stage is free for the producer
    ++consumed;
    if (++cb < ci.num_blocks) continue;
    finish_item();
    ci = persistent_item<kKeys>(tp, ci.index + stride, stride);
    if (ci.num_blocks == 0) break;
    cb = 0;
    ++c_ordinal;
    begin_item();
  }
  cp_async_wait<0>();  // only empty groups can remain
}

// Host side: the engine's tile parameters without split-KV, as many CTAs as fit on the SMs.
template <int D, int kWarps, int kStages>
void launch_persistent_decode(const PagedAttentionParams& p, cudaStream_t stream) {
  using PS = PersistentShape<D, kWarps, kStages>;
  TileParams tp;
  tp.p = p;
  tp.group = p.num_heads / p.kv.num_kv_heads;
  tp.scale_log2 = p.scale * attention::kLog2e;
  attention::page_divider(tp, p.kv.block_size);
  constexpr auto kKernel = persistent_decode_kernel<D, kWarps, kStages>;
  cuda::allow_dynamic_smem<kKernel, PS::kSmemBytes>();
  int per_sm = 0;
  INFLIGHT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, PS::kThreads,
                                                                    PS::kSmemBytes));
  const int64_t items = static_cast<int64_t>(p.num_seqs) * p.kv.num_kv_heads;
  const auto ctas =
      static_cast<unsigned>(std::min<int64_t>(items, std::max(per_sm, 1) * cuda::num_sms()));
  cuda::launch_pdl(kKernel, dim3(ctas), PS::kThreads, PS::kSmemBytes, stream, tp);
}

}  // namespace inflight::lab
