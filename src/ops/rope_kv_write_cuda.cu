// rope_kv_write on CUDA (bf16 in/out, fp32 math): NeoX rotate-half RoPE on the q and k heads of
// one token, rotated q to q_out, rotated k and plain v into the paged cache at slot_mapping[t].
//
// Four kernels, picked on the host (bf16 caches: vector or scalar; e4m3 caches: fp8 token or fp8):
//  - vector (D % 16 == 0, 16-byte aligned tensors; every Llama, Mistral and Qwen2 head size):
//    blocks of (token, 64 items), an item 16 bytes of output: 8 consecutive pairs (i, i + D/2)
//    of one query or key head, rotated (two 16-byte loads, two 16-byte stores), or 8 values of
//    one value head, copied. Each thread issues its item's loads first; meanwhile the block
//    computes cos/sin of angle_i = pos * inv_freq[i] (the angle rounded to f32 first, as the
//    reference does) into shared memory. Memory-bound at large T (a 4,096-token prefill of
//    Llama-3.1-8B moves 100 MB); a decode token's 448 items spread over 7 blocks.
//  - scalar (any even D): blocks of (token, group of kHeadsPerBlock heads), heads counted over
//    q, k and v (H + 2 KH); each block computes the cos/sin of its token, then its threads
//    rotate (head, i) pairs of its query and key heads and copy its value heads.
//  - fp8 token (an e4m3 cache, D = 64, 128 or 256, 8-byte aligned tensors): a block per token,
//    each of its 8 warps takes heads warp, warp + 8, ..., up to 8 of them at once: their loads
//    (kPer = D / 64 consecutive values of each half per lane) go out before the token's cos/sin
//    are computed, once for the whole token. Query heads are rotated to q_out; key heads rotated
//    and value heads taken as they are, then quantized from f32 in registers with the scale of
//    the head's largest magnitude (a warp max), as the CPU reference does.
//  - fp8 (an e4m3 cache, any even D): blocks of (token, kFp8Warps heads), one warp per head,
//    the same through the warp's f32 row in shared memory.
// A negative slot skips the cache writes.
#include <cuda_fp8.h>

#include <type_traits>

#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kThreads = 128;

constexpr int32_t kHeadsPerBlock = 4;

__global__ void __launch_bounds__(kThreads) rope_kv_write_kernel(RopeKvWriteParams p) {
  cuda::pdl_launch_dependents();  // see ops_cuda.cuh: launched with PDL
  cuda::pdl_wait();
  extern __shared__ float trig[];  // [2 * half]: cos, then sin
  const int64_t t = blockIdx.x;
  const int32_t num_heads = p.num_heads, num_kv_heads = p.kv.num_kv_heads;
  const int32_t head_dim = p.kv.head_dim, half = head_dim / 2;
  const int64_t slot = p.slot_mapping[t];
  // Heads [0, H) are queries, [H, H + KH) keys, [H + KH, H + 2 KH) values; keys and values
  // only when the token has a slot.
  const int32_t first = static_cast<int32_t>(blockIdx.y) * kHeadsPerBlock;
  const int32_t last = min(first + kHeadsPerBlock, num_heads + (slot >= 0 ? 2 * num_kv_heads : 0));
  if (first >= last) return;  // the whole block leaves together
  float* cos_v = trig;
  float* sin_v = trig + half;
  const auto pos = static_cast<float>(p.positions[t]);
  for (int32_t i = threadIdx.x; i < half; i += blockDim.x) {
    sincosf(pos * p.inv_freq[i], &sin_v[i], &cos_v[i]);
  }
  __syncthreads();

  const int64_t row = static_cast<int64_t>(num_heads + 2 * num_kv_heads) * head_dim;
  const bf16* src = static_cast<const bf16*>(p.qkv) + t * row;
  const int32_t rotated_end = min(last, num_heads + num_kv_heads);
  for (int32_t item = threadIdx.x; item < (rotated_end - first) * half; item += blockDim.x) {
    const int32_t head = first + item / half, i = item % half;
    const bf16* x = src + static_cast<int64_t>(head) * head_dim;
    bf16* dst;
    if (head < num_heads) {
      dst = static_cast<bf16*>(p.q_out) + (t * num_heads + head) * head_dim;
    } else {
      dst = static_cast<bf16*>(p.kv.k) + p.kv.offset(slot, head - num_heads);
    }
    const float x1 = cuda::to_f32(x[i]), x2 = cuda::to_f32(x[i + half]);
    dst[i] = cuda::to_bf16(x1 * cos_v[i] - x2 * sin_v[i]);
    dst[i + half] = cuda::to_bf16(x2 * cos_v[i] + x1 * sin_v[i]);
  }
  const int32_t v_begin = max(first, num_heads + num_kv_heads);
  for (int32_t item = threadIdx.x; item < max(0, last - v_begin) * head_dim; item += blockDim.x) {
    const int32_t head = v_begin + item / head_dim, d = item % head_dim;
    static_cast<bf16*>(p.kv.v)[p.kv.offset(slot, head - num_heads - num_kv_heads) + d] =
        src[static_cast<int64_t>(head) * head_dim + d];
  }
}

constexpr int kVectorThreads = 64;

__device__ __forceinline__ uint4 rotate8(const uint4& lo, const uint4& hi, const float* cos_v,
                                         const float* sin_v, bool upper) {
  // lo = x[i .. i + 7], hi = x[i + half .. i + half + 7]; upper: the x[i + half] outputs.
  const auto* l = reinterpret_cast<const cuda::bf16x2*>(&lo);
  const auto* h = reinterpret_cast<const cuda::bf16x2*>(&hi);
  uint4 out;
  auto* o = reinterpret_cast<cuda::bf16x2*>(&out);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 a = cuda::to_f32x2(l[j]), b = cuda::to_f32x2(h[j]);
    const float c0 = cos_v[2 * j], c1 = cos_v[2 * j + 1];
    const float s0 = sin_v[2 * j], s1 = sin_v[2 * j + 1];
    o[j] = upper ? __floats2bfloat162_rn(b.x * c0 + a.x * s0, b.y * c1 + a.y * s1)
                 : __floats2bfloat162_rn(a.x * c0 - b.x * s0, a.y * c1 - b.y * s1);
  }
  return out;
}

// Items of one token: (query or key head, 8 pairs) rotated, then (value head, 8 values) copied.
INFLIGHT_HOST_DEVICE int32_t rotated_items(const RopeKvWriteParams& p, bool has_slot) {
  return (has_slot ? p.num_heads + p.kv.num_kv_heads : p.num_heads) * (p.kv.head_dim / 16);
}
INFLIGHT_HOST_DEVICE int32_t vector_items(const RopeKvWriteParams& p, bool has_slot) {
  return rotated_items(p, has_slot) + (has_slot ? p.kv.num_kv_heads * (p.kv.head_dim / 8) : 0);
}

__global__ void __launch_bounds__(kVectorThreads) rope_kv_write_vector_kernel(RopeKvWriteParams p) {
  cuda::pdl_launch_dependents();  // see ops_cuda.cuh: launched with PDL
  cuda::pdl_wait();
  extern __shared__ float trig[];  // [2 * half]: cos, then sin
  const int64_t t = blockIdx.x;
  const int32_t item = static_cast<int32_t>(blockIdx.y * blockDim.x + threadIdx.x);
  const int32_t num_heads = p.num_heads, num_kv_heads = p.kv.num_kv_heads;
  const int32_t head_dim = p.kv.head_dim, half = head_dim / 2;
  const int32_t rotate_chunks = half / 8, copy_chunks = head_dim / 8;
  // The loads of this thread's item go out with the token's position and slot, before cos/sin.
  const int64_t slot = p.slot_mapping[t];
  const auto pos = static_cast<float>(p.positions[t]);
  const int32_t rotated = rotated_items(p, slot >= 0);
  const bool active = item < vector_items(p, slot >= 0);
  const bf16* src = static_cast<const bf16*>(p.qkv) +
                    t * static_cast<int64_t>(num_heads + 2 * num_kv_heads) * head_dim;
  int32_t head = 0, i = 0;
  uint4 lo{}, hi{};
  if (active && item < rotated) {
    head = item / rotate_chunks;
    i = 8 * (item % rotate_chunks);
    lo = *reinterpret_cast<const uint4*>(src + static_cast<int64_t>(head) * head_dim + i);
    hi = *reinterpret_cast<const uint4*>(src + static_cast<int64_t>(head) * head_dim + i + half);
  } else if (active) {
    head = (item - rotated) / copy_chunks;
    i = 8 * ((item - rotated) % copy_chunks);
    lo = *reinterpret_cast<const uint4*>(
        src + static_cast<int64_t>(num_heads + num_kv_heads + head) * head_dim + i);
  }
  float* cos_v = trig;
  float* sin_v = trig + half;
  for (int32_t f = threadIdx.x; f < half; f += blockDim.x) {
    sincosf(pos * p.inv_freq[f], &sin_v[f], &cos_v[f]);
  }
  __syncthreads();
  if (!active) return;
  if (item < rotated) {
    bf16* dst = head < num_heads ? static_cast<bf16*>(p.q_out) + (t * num_heads + head) * head_dim
                                 : static_cast<bf16*>(p.kv.k) + p.kv.offset(slot, head - num_heads);
    *reinterpret_cast<uint4*>(dst + i) = rotate8(lo, hi, cos_v + i, sin_v + i, false);
    *reinterpret_cast<uint4*>(dst + i + half) = rotate8(lo, hi, cos_v + i, sin_v + i, true);
  } else {
    *reinterpret_cast<uint4*>(static_cast<bf16*>(p.kv.v) + p.kv.offset(slot, head) + i) = lo;
  }
}

constexpr int kFp8Warps = 4;

__global__ void __launch_bounds__(32 * kFp8Warps) rope_kv_write_fp8_kernel(RopeKvWriteParams p) {
  cuda::pdl_launch_dependents();  // see ops_cuda.cuh: launched with PDL
  cuda::pdl_wait();
  // [2 * half]: cos, then sin; then a [head_dim] f32 row per warp.
  extern __shared__ float smem[];
  const int64_t t = blockIdx.x;
  const int32_t num_heads = p.num_heads, num_kv_heads = p.kv.num_kv_heads;
  const int32_t head_dim = p.kv.head_dim, half = head_dim / 2;
  const int64_t slot = p.slot_mapping[t];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t head = static_cast<int32_t>(blockIdx.y) * kFp8Warps + warp;
  const int32_t heads = num_heads + (slot >= 0 ? 2 * num_kv_heads : 0);
  if (static_cast<int32_t>(blockIdx.y) * kFp8Warps >= heads) return;  // the whole block
  float* cos_v = smem;
  float* sin_v = smem + half;
  float* row = smem + head_dim + warp * head_dim;
  const auto pos = static_cast<float>(p.positions[t]);
  for (int32_t i = threadIdx.x; i < half; i += blockDim.x) {
    sincosf(pos * p.inv_freq[i], &sin_v[i], &cos_v[i]);
  }
  __syncthreads();
  if (head >= heads) return;

  const bf16* x = static_cast<const bf16*>(p.qkv) +
                  t * static_cast<int64_t>(num_heads + 2 * num_kv_heads) * head_dim +
                  static_cast<int64_t>(head) * head_dim;
  if (head < num_heads + num_kv_heads) {
    bf16* q = static_cast<bf16*>(p.q_out) + (t * num_heads + head) * head_dim;
    for (int32_t i = lane; i < half; i += 32) {
      const float x1 = cuda::to_f32(x[i]), x2 = cuda::to_f32(x[i + half]);
      const float lo = x1 * cos_v[i] - x2 * sin_v[i], hi = x2 * cos_v[i] + x1 * sin_v[i];
      if (head < num_heads) {
        q[i] = cuda::to_bf16(lo);
        q[i + half] = cuda::to_bf16(hi);
      } else {
        row[i] = lo;
        row[i + half] = hi;
      }
    }
    if (head < num_heads) return;
  } else {
    for (int32_t i = lane; i < head_dim; i += 32) row[i] = cuda::to_f32(x[i]);
  }
  __syncwarp();
  float amax = 0.0f;
  for (int32_t i = lane; i < head_dim; i += 32) amax = fmaxf(amax, fabsf(row[i]));
  const float scale = kv_fp8_scale(cuda::warp_max(amax));
  const float inv = 1.0f / scale;
  const bool is_key = head < num_heads + num_kv_heads;
  const int32_t kv_head = head - num_heads - (is_key ? 0 : num_kv_heads);
  auto* values = static_cast<uint8_t*>(is_key ? p.kv.k : p.kv.v) + p.kv.offset(slot, kv_head);
  for (int32_t i = lane; i < head_dim; i += 32) {
    values[i] =
        static_cast<uint8_t>(__nv_cvt_float_to_fp8(row[i] * inv, __NV_SATFINITE, __NV_E4M3));
  }
  if (lane == 0) (is_key ? p.kv.k_scales : p.kv.v_scales)[p.kv.scale_offset(slot, kv_head)] = scale;
}

constexpr int kTokenWarps = 8;   // warps of a token block
constexpr int kHeadsAtOnce = 8;  // heads a warp loads before it rotates or quantizes them

template <int kPer>  // values of each half a lane takes: D = 64 kPer
__global__ void __launch_bounds__(32 * kTokenWarps)
    rope_kv_write_fp8_token_kernel(RopeKvWriteParams p) {
  constexpr int kD = 64 * kPer, kHalf = kD / 2;
  using Values = std::conditional_t<kPer == 1, uint16_t,
                                    std::conditional_t<kPer == 2, uint32_t, uint2>>;  // kPer bf16
  using Bytes = std::conditional_t<kPer == 1, uint8_t,
                                   std::conditional_t<kPer == 2, uint16_t, uint32_t>>;  // kPer e4m3
  cuda::pdl_launch_dependents();  // see ops_cuda.cuh: launched with PDL
  cuda::pdl_wait();
  __shared__ float cos_v[kHalf], sin_v[kHalf];
  const int64_t t = blockIdx.x;
  const int warp = threadIdx.x / 32, i0 = (threadIdx.x % 32) * kPer;
  const int32_t num_heads = p.num_heads, num_kv_heads = p.kv.num_kv_heads;
  const int64_t slot = p.slot_mapping[t];
  const int32_t heads = num_heads + (slot >= 0 ? 2 * num_kv_heads : 0);
  const bf16* src = static_cast<const bf16*>(p.qkv) +
                    t * static_cast<int64_t>(num_heads + 2 * num_kv_heads) * kD + i0;
  Values lo[kHeadsAtOnce], hi[kHeadsAtOnce];  // this lane's values of each half, per head
  auto load = [&](int32_t first) {
#pragma unroll
    for (int u = 0; u < kHeadsAtOnce; ++u) {
      const int32_t head = first + u * kTokenWarps;
      if (head >= heads) break;
      lo[u] = *reinterpret_cast<const Values*>(src + static_cast<int64_t>(head) * kD);
      hi[u] = *reinterpret_cast<const Values*>(src + static_cast<int64_t>(head) * kD + kHalf);
    }
  };
  load(warp);
  const auto pos = static_cast<float>(p.positions[t]);
  for (int32_t i = threadIdx.x; i < kHalf; i += blockDim.x) {
    sincosf(pos * p.inv_freq[i], &sin_v[i], &cos_v[i]);
  }
  __syncthreads();
  for (int32_t first = warp; first < heads; first += kTokenWarps * kHeadsAtOnce) {
    if (first != warp) load(first);
#pragma unroll
    for (int u = 0; u < kHeadsAtOnce; ++u) {
      const int32_t head = first + u * kTokenWarps;
      if (head >= heads) break;
      float a[kPer], b[kPer];  // values i0 + e and i0 + e + half
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        a[e] = cuda::to_f32(reinterpret_cast<const bf16*>(&lo[u])[e]);
        b[e] = cuda::to_f32(reinterpret_cast<const bf16*>(&hi[u])[e]);
      }
      const bool rotated = head < num_heads + num_kv_heads;
      if (rotated) {
#pragma unroll
        for (int e = 0; e < kPer; ++e) {
          const float x1 = a[e], x2 = b[e], c = cos_v[i0 + e], s = sin_v[i0 + e];
          a[e] = x1 * c - x2 * s;
          b[e] = x2 * c + x1 * s;
        }
      }
      if (head < num_heads) {
        Values qa, qb;
#pragma unroll
        for (int e = 0; e < kPer; ++e) {
          reinterpret_cast<bf16*>(&qa)[e] = cuda::to_bf16(a[e]);
          reinterpret_cast<bf16*>(&qb)[e] = cuda::to_bf16(b[e]);
        }
        bf16* q = static_cast<bf16*>(p.q_out) + (t * num_heads + head) * kD + i0;
        *reinterpret_cast<Values*>(q) = qa;
        *reinterpret_cast<Values*>(q + kHalf) = qb;
        continue;
      }
      float amax = 0.0f;
#pragma unroll
      for (int e = 0; e < kPer; ++e) amax = fmaxf(amax, fmaxf(fabsf(a[e]), fabsf(b[e])));
      const float scale = kv_fp8_scale(cuda::warp_max(amax));
      const float inv = 1.0f / scale;
      const int32_t kv_head = head - num_heads - (rotated ? 0 : num_kv_heads);
      Bytes qa, qb;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        reinterpret_cast<uint8_t*>(&qa)[e] =
            static_cast<uint8_t>(__nv_cvt_float_to_fp8(a[e] * inv, __NV_SATFINITE, __NV_E4M3));
        reinterpret_cast<uint8_t*>(&qb)[e] =
            static_cast<uint8_t>(__nv_cvt_float_to_fp8(b[e] * inv, __NV_SATFINITE, __NV_E4M3));
      }
      auto* values =
          static_cast<uint8_t*>(rotated ? p.kv.k : p.kv.v) + p.kv.offset(slot, kv_head) + i0;
      *reinterpret_cast<Bytes*>(values) = qa;
      *reinterpret_cast<Bytes*>(values + kHalf) = qb;
      if (i0 == 0) {
        (rotated ? p.kv.k_scales : p.kv.v_scales)[p.kv.scale_offset(slot, kv_head)] = scale;
      }
    }
  }
}

}  // namespace

void rope_kv_write_cuda(const RopeKvWriteParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.dtype == DType::kBF16, ErrorCode::kUnsupported,
                      "rope_kv_write_cuda: bf16 only, got {}", dtype_name(p.dtype));
  if (p.num_tokens == 0) return;
  INFLIGHT_CHECK(p.num_tokens <= cuda::kMaxGridX, "rope_kv_write_cuda: {} tokens exceed the grid",
                 p.num_tokens);
  const size_t smem = static_cast<size_t>(p.kv.head_dim) * sizeof(float);
  INFLIGHT_CHECK_CODE((1 + kFp8Warps) * smem <= 48 * 1024, ErrorCode::kUnsupported,
                      "rope_kv_write_cuda: head_dim {} is too large", p.kv.head_dim);
  if (p.kv.fp8() && cuda::aligned(p.qkv, 8) && cuda::aligned(p.q_out, 8) &&
      cuda::aligned(p.kv.k, 4) && cuda::aligned(p.kv.v, 4)) {
    const auto tokens = static_cast<unsigned>(p.num_tokens);
    switch (p.kv.head_dim) {
      case 64:
        cuda::launch_pdl(rope_kv_write_fp8_token_kernel<1>, tokens, 32 * kTokenWarps, 0, stream, p);
        INFLIGHT_CUDA_CHECK_LAUNCH();
        return;
      case 128:
        cuda::launch_pdl(rope_kv_write_fp8_token_kernel<2>, tokens, 32 * kTokenWarps, 0, stream, p);
        INFLIGHT_CUDA_CHECK_LAUNCH();
        return;
      case 256:
        cuda::launch_pdl(rope_kv_write_fp8_token_kernel<4>, tokens, 32 * kTokenWarps, 0, stream, p);
        INFLIGHT_CUDA_CHECK_LAUNCH();
        return;
      default:
        break;
    }
  }
  if (p.kv.fp8()) {
    const int32_t heads = p.num_heads + 2 * p.kv.num_kv_heads;
    const dim3 grid(static_cast<unsigned>(p.num_tokens),
                    static_cast<unsigned>((heads + kFp8Warps - 1) / kFp8Warps));
    cuda::launch_pdl(rope_kv_write_fp8_kernel, grid, 32 * kFp8Warps, (1 + kFp8Warps) * smem, stream,
                     p);
    INFLIGHT_CUDA_CHECK_LAUNCH();
    return;
  }
  if (p.kv.head_dim % 16 == 0 && cuda::aligned(p.qkv, 16) && cuda::aligned(p.q_out, 16) &&
      cuda::aligned(p.kv.k, 16) && cuda::aligned(p.kv.v, 16)) {
    // Blocks of 64 items: a decode token's heads spread over several SMs.
    const int32_t items = vector_items(p, true);
    INFLIGHT_CHECK(items <= cuda::kMaxGridYZ * kVectorThreads,
                   "rope_kv_write_cuda: {} heads are too many", p.num_heads);
    const dim3 grid(static_cast<unsigned>(p.num_tokens),
                    static_cast<unsigned>((items + kVectorThreads - 1) / kVectorThreads));
    cuda::launch_pdl(rope_kv_write_vector_kernel, grid, kVectorThreads, smem, stream, p);
    INFLIGHT_CUDA_CHECK_LAUNCH();
    return;
  }
  const int32_t heads = p.num_heads + 2 * p.kv.num_kv_heads;
  const dim3 grid(static_cast<unsigned>(p.num_tokens),
                  static_cast<unsigned>((heads + kHeadsPerBlock - 1) / kHeadsPerBlock));
  cuda::launch_pdl(rope_kv_write_kernel, grid, kThreads, smem, stream, p);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
