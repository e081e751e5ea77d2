// rms_norm on CUDA (bf16 in/out, fp32 statistics), fused with the residual add:
//
//   residual[r] <- bf16(residual[r] + add[r])      (when add is set)
//   out[r]      <- bf16(residual[r] * rsqrt(mean(residual[r]^2) + eps) * weight)
//
// One block per row. The statistics are taken over the residual as stored (rounded to bf16),
// so the next layer sees exactly the values that were normalised. Each thread re-reads in the
// second pass the elements it wrote in the first, so no barrier is needed between the passes
// beyond the one inside block_sum.
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) rms_norm_kernel(RmsNormParams p) {
  const int64_t row = blockIdx.x;
  const int64_t dim = p.dim;
  bf16* residual = static_cast<bf16*>(p.residual) + row * dim;
  const bf16* add = p.add != nullptr ? static_cast<const bf16*>(p.add) + row * dim : nullptr;
  const auto* weight = static_cast<const bf16*>(p.weight);
  bf16* out = static_cast<bf16*>(p.out) + row * dim;

  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float x = cuda::to_f32(residual[i]);
    if (add != nullptr) {
      const bf16 r = cuda::to_bf16(x + cuda::to_f32(add[i]));
      residual[i] = r;
      x = cuda::to_f32(r);
    }
    sum_sq += x * x;
  }
  sum_sq = cuda::block_sum(sum_sq);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(dim) + p.eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    out[i] = cuda::to_bf16(cuda::to_f32(residual[i]) * inv_rms * cuda::to_f32(weight[i]));
  }
}

}  // namespace

void rms_norm_cuda(const RmsNormParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.dtype == DType::kBF16, ErrorCode::kUnsupported,
                      "rms_norm_cuda: bf16 only, got {}", dtype_name(p.dtype));
  if (p.rows == 0 || p.dim == 0) return;
  INFLIGHT_CHECK(p.rows <= cuda::kMaxGridX, "rms_norm_cuda: {} rows exceed the grid", p.rows);
  rms_norm_kernel<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
