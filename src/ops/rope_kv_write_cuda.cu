// rope_kv_write on CUDA (bf16 in/out, fp32 math): NeoX rotate-half RoPE on the q and k heads of
// one token, rotated q to q_out, rotated k and plain v into the paged cache at slot_mapping[t].
//
// One block per token. The block first computes cos/sin of angle_i = pos * inv_freq[i] for the
// D/2 frequencies into shared memory (the angle rounded to f32 first, as the reference does),
// then every thread rotates (head, i) pairs of the H query heads and KH key heads, and copies
// the KH value heads. A negative slot skips the cache writes.
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads) rope_kv_write_kernel(RopeKvWriteParams p) {
  extern __shared__ float trig[];  // [2 * half]: cos, then sin
  const int64_t t = blockIdx.x;
  const int32_t num_heads = p.num_heads, num_kv_heads = p.kv.num_kv_heads;
  const int32_t head_dim = p.kv.head_dim, half = head_dim / 2;
  float* cos_v = trig;
  float* sin_v = trig + half;
  const auto pos = static_cast<float>(p.positions[t]);
  for (int32_t i = threadIdx.x; i < half; i += blockDim.x) {
    sincosf(pos * p.inv_freq[i], &sin_v[i], &cos_v[i]);
  }
  __syncthreads();

  const int64_t row = static_cast<int64_t>(num_heads + 2 * num_kv_heads) * head_dim;
  const bf16* src = static_cast<const bf16*>(p.qkv) + t * row;
  const int64_t slot = p.slot_mapping[t];
  // Heads [0, H) are queries, [H, H + KH) keys (only when the token has a slot).
  const int32_t rotated_heads = num_heads + (slot >= 0 ? num_kv_heads : 0);
  for (int32_t item = threadIdx.x; item < rotated_heads * half; item += blockDim.x) {
    const int32_t head = item / half, i = item % half;
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
  if (slot < 0) return;
  const bf16* v_src = src + static_cast<int64_t>(num_heads + num_kv_heads) * head_dim;
  for (int32_t item = threadIdx.x; item < num_kv_heads * head_dim; item += blockDim.x) {
    const int32_t head = item / head_dim, d = item % head_dim;
    static_cast<bf16*>(p.kv.v)[p.kv.offset(slot, head) + d] = v_src[item];
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
  INFLIGHT_CHECK_CODE(smem <= 48 * 1024, ErrorCode::kUnsupported,
                      "rope_kv_write_cuda: head_dim {} is too large", p.kv.head_dim);
  rope_kv_write_kernel<<<static_cast<unsigned>(p.num_tokens), kThreads, smem, stream>>>(p);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
