// clamp on CUDA (bf16, in place): x = bf16(min(max(x, -limit), limit)), a flat grid over the
// elements. The bounds are applied in f32 and rounded once, as PyTorch clamps a bf16 tensor
// with a float limit.
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 132 * 16;

__global__ void __launch_bounds__(kThreads) clamp_kernel(ClampParams p) {
  cuda::pdl_launch_dependents();  // see ops_cuda.cuh: launched with PDL
  cuda::pdl_wait();
  auto* x = static_cast<bf16*>(p.x);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel;
       i += stride) {
    x[i] = cuda::to_bf16(fminf(fmaxf(cuda::to_f32(x[i]), -p.limit), p.limit));
  }
}

}  // namespace

void clamp_cuda(const ClampParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.dtype == DType::kBF16, ErrorCode::kUnsupported,
                      "clamp_cuda: bf16 only, got {}", dtype_name(p.dtype));
  if (p.numel == 0) return;
  const auto blocks =
      static_cast<unsigned>(std::min(kMaxBlocks, (p.numel + kThreads - 1) / kThreads));
  cuda::launch_pdl(clamp_kernel, blocks, kThreads, 0, stream, p);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
