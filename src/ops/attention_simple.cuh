// The simple paged-attention kernel: any even head_dim <= kPagedAttentionMaxHeadDim, bf16 q and
// a bf16 or e4m3 cache, no tensor cores. paged_attention_cuda takes it where the tiles
// (attention_tile.cuh) do not apply; the attention lab (dev/cuda/attention) times the tiles against
// it.
//
// One block of kWarps warps per (query token, query head). Token t finds its sequence s by
// binary search over query_start and its context position p = context_lens[s] -
// (query_start[s + 1] - t); it attends to keys [lo, p] of s, lo = max(0, p - window + 1) with a
// window, else 0; an ALiBi slope adds slope * (j - p) to the score of key j. Warp w takes keys
// lo + w, lo + w + kWarps, ...; for each key the warp's lanes split the head dimension in bf16
// pairs (lane l holds pairs l, l + 32, ...), reduce the dot product with shuffles, and fold the
// key into the warp's online softmax state (running max m, sum l, accumulator acc[D]). The
// kWarps states are then merged through shared memory by rescaling each with
// exp(m_w - max_w m_w). An e4m3 cache's pairs are widened and scaled by their row's scale as
// they are read.
#pragma once

#include <cuda_fp8.h>

#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight::attention {

namespace simple {

using cuda::bf16;
using cuda::bf16x2;

constexpr int kBlockWarps = 4;
// bf16 pairs per lane: head_dim <= 2 * 32 * kPairsPerLane.
constexpr int kPairsPerLane = kPagedAttentionMaxHeadDim / 64;

// Pair pi of the row at element offset `off` of a bf16 or e4m3 (times `scale`) cache, as f32.
__device__ __forceinline__ float2 load_pair(const void* cache, int64_t off, int32_t pi, bool fp8,
                                            float scale) {
  if (!fp8)
    return cuda::to_f32x2(
        reinterpret_cast<const bf16x2*>(static_cast<const bf16*>(cache) + off)[pi]);
  const auto bytes =
      reinterpret_cast<const __nv_fp8x2_storage_t*>(static_cast<const uint8_t*>(cache) + off)[pi];
  const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(bytes, __NV_E4M3)));
  return make_float2(f.x * scale, f.y * scale);
}

// A template, so that the library and the lab, which both include this header, share one
// definition.
template <int kWarps>
__global__ void __launch_bounds__(kWarps * 32)
    paged_attention_simple_kernel(PagedAttentionParams p) {
  __shared__ float merge_m[kWarps];
  __shared__ float merge_l[kWarps];
  __shared__ float merge_acc[kWarps][kPagedAttentionMaxHeadDim];

  const int64_t t = blockIdx.x;
  const int32_t h = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t head_dim = p.kv.head_dim, pairs = head_dim / 2;
  const int32_t kv_head = h / (p.num_heads / p.kv.num_kv_heads);

  // The sequence that owns token t: the last s with query_start[s] <= t.
  int32_t s_lo = 0, s_hi = p.num_seqs - 1;
  while (s_lo < s_hi) {
    const int32_t mid = (s_lo + s_hi + 1) / 2;
    if (p.query_start[mid] <= t) {
      s_lo = mid;
    } else {
      s_hi = mid - 1;
    }
  }
  const int32_t s = s_lo;
  const int32_t pos = p.context_lens[s] - (p.query_start[s + 1] - static_cast<int32_t>(t));
  const int32_t first = p.sliding_window > 0 ? max(0, pos - p.sliding_window + 1) : 0;

  // This lane's pairs of q, pre-scaled.
  const int64_t q_offset = (t * p.num_heads + h) * head_dim;
  const auto* q2 = reinterpret_cast<const bf16x2*>(static_cast<const bf16*>(p.q) + q_offset);
  float2 q[kPairsPerLane];
#pragma unroll
  for (int i = 0; i < kPairsPerLane; ++i) {
    const int32_t pi = lane + 32 * i;
    q[i] = make_float2(0.0f, 0.0f);
    if (pi < pairs) {
      const float2 f = cuda::to_f32x2(q2[pi]);
      q[i] = make_float2(f.x * p.scale, f.y * p.scale);
    }
  }

  // ALiBi: the score of key j gains slope * (j - pos) (q is pre-scaled, the bias is not).
  const float alibi_slope = p.alibi_slopes != nullptr ? p.alibi_slopes[h] : 0.0f;

  float m = -INFINITY, l = 0.0f;
  float2 acc[kPairsPerLane];
#pragma unroll
  for (int i = 0; i < kPairsPerLane; ++i) acc[i] = make_float2(0.0f, 0.0f);

  const bool fp8 = p.kv.fp8();
  for (int32_t j = first + warp; j <= pos; j += kWarps) {
    const int64_t slot = p.kv.slot(s, j), off = p.kv.offset(slot, kv_head);
    const float k_scale = fp8 ? p.kv.k_scales[p.kv.scale_offset(slot, kv_head)] : 1.0f;
    const float v_scale = fp8 ? p.kv.v_scales[p.kv.scale_offset(slot, kv_head)] : 1.0f;
    float score = 0.0f;
#pragma unroll
    for (int i = 0; i < kPairsPerLane; ++i) {
      const int32_t pi = lane + 32 * i;
      if (pi < pairs) {
        const float2 k = load_pair(p.kv.k, off, pi, fp8, k_scale);
        score += q[i].x * k.x + q[i].y * k.y;
      }
    }
    score = cuda::warp_sum(score) + alibi_slope * static_cast<float>(j - pos);
    const float m_new = fmaxf(m, score);
    const float correction = expf(m - m_new);  // 0 for the first key (m = -inf)
    const float weight = expf(score - m_new);
    l = l * correction + weight;
#pragma unroll
    for (int i = 0; i < kPairsPerLane; ++i) {
      const int32_t pi = lane + 32 * i;
      if (pi < pairs) {
        const float2 v = load_pair(p.kv.v, off, pi, fp8, v_scale);
        acc[i].x = acc[i].x * correction + weight * v.x;
        acc[i].y = acc[i].y * correction + weight * v.y;
      }
    }
    m = m_new;
  }

  // Merge the warps' states. A warp that saw no key has m = -inf and l = 0; at least one warp
  // saw key `pos`, so the merged max is finite.
  if (lane == 0) {
    merge_m[warp] = m;
    merge_l[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < kPairsPerLane; ++i) {
    const int32_t pi = lane + 32 * i;
    if (pi < pairs) {
      merge_acc[warp][2 * pi] = acc[i].x;
      merge_acc[warp][2 * pi + 1] = acc[i].y;
    }
  }
  __syncthreads();
  float m_max = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) m_max = fmaxf(m_max, merge_m[w]);
  float scale_w[kWarps];
  float l_total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    scale_w[w] = merge_m[w] == -INFINITY ? 0.0f : expf(merge_m[w] - m_max);
    l_total += merge_l[w] * scale_w[w];
  }
  const float inv_l = 1.0f / l_total;
  bf16* out = static_cast<bf16*>(p.out) + q_offset;
  for (int32_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += merge_acc[w][d] * scale_w[w];
    out[d] = cuda::to_bf16(o * inv_l);
  }
}

}  // namespace simple

// Grid (tokens, query heads); the caller checks both against the grid limits.
inline void launch_simple(const PagedAttentionParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.num_tokens), static_cast<unsigned>(p.num_heads));
  simple::paged_attention_simple_kernel<simple::kBlockWarps>
      <<<grid, simple::kBlockWarps * 32, 0, stream>>>(p);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight::attention
