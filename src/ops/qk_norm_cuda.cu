// qk_norm on CUDA (bf16 in place, fp32 statistics): one warp per (token, q or k head), each
// lane holding head_dim / 32 elements (rounded up) in registers between the two passes.
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kWarpsPerBlock = 8;
constexpr int kMaxPerLane = kQkNormMaxHeadDim / 32;

__global__ void __launch_bounds__(kWarpsPerBlock * 32) qk_norm_kernel(QkNormParams p) {
  cuda::pdl_launch_dependents();  // see ops_cuda.cuh: launched with PDL
  cuda::pdl_wait();
  const int64_t normed = p.num_heads + p.num_kv_heads;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (item >= p.tokens * normed) return;
  const int lane = threadIdx.x % 32;
  const int64_t t = item / normed, h = item % normed;
  const int64_t d = p.head_dim;
  bf16* x = static_cast<bf16*>(p.qkv) + t * (p.num_heads + 2 * p.num_kv_heads) * d + h * d;
  const auto* w = static_cast<const bf16*>(h < p.num_heads ? p.q_weight : p.k_weight);
  float v[kMaxPerLane];
  float sum_sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int64_t j = lane + 32 * i;
    v[i] = j < d ? cuda::to_f32(x[j]) : 0.0f;
    sum_sq += v[i] * v[i];
  }
  sum_sq = cuda::warp_sum(sum_sq);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(d) + p.eps);
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int64_t j = lane + 32 * i;
    if (j < d) x[j] = cuda::to_bf16(v[i] * inv_rms * cuda::to_f32(w[j]));
  }
}

}  // namespace

void qk_norm_cuda(const QkNormParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.dtype == DType::kBF16, ErrorCode::kUnsupported,
                      "qk_norm_cuda: bf16 only, got {}", dtype_name(p.dtype));
  INFLIGHT_CHECK_CODE(p.head_dim <= kQkNormMaxHeadDim, ErrorCode::kUnsupported,
                      "qk_norm_cuda: head_dim {} > {}", p.head_dim, kQkNormMaxHeadDim);
  const int64_t items = p.tokens * (p.num_heads + p.num_kv_heads);
  if (items == 0) return;
  const int64_t blocks = (items + kWarpsPerBlock - 1) / kWarpsPerBlock;
  INFLIGHT_CHECK(blocks <= cuda::kMaxGridX, "qk_norm_cuda: {} heads exceed the grid", items);
  cuda::launch_pdl(qk_norm_kernel, static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, stream,
                   p);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
