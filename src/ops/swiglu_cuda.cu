// swiglu on CUDA (bf16 in/out, fp32 math):
//   out[r, i] = bf16(silu(gate_up[r, i]) * gate_up[r, inter + i]),  silu(g) = g / (1 + exp(-g))
// One block per row, threads striding over the inter columns.
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) swiglu_kernel(SwigluParams p) {
  const int64_t row = blockIdx.x;
  const bf16* gate = static_cast<const bf16*>(p.gate_up) + row * 2 * p.inter;
  const bf16* up = gate + p.inter;
  bf16* out = static_cast<bf16*>(p.out) + row * p.inter;
  for (int64_t i = threadIdx.x; i < p.inter; i += blockDim.x) {
    const float g = cuda::to_f32(gate[i]);
    out[i] = cuda::to_bf16(g / (1.0f + expf(-g)) * cuda::to_f32(up[i]));
  }
}

}  // namespace

void swiglu_cuda(const SwigluParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.dtype == DType::kBF16, ErrorCode::kUnsupported,
                      "swiglu_cuda: bf16 only, got {}", dtype_name(p.dtype));
  if (p.rows == 0 || p.inter == 0) return;
  INFLIGHT_CHECK(p.rows <= cuda::kMaxGridX, "swiglu_cuda: {} rows exceed the grid", p.rows);
  const int threads = static_cast<int>(std::min<int64_t>(kThreads, (p.inter + 31) / 32 * 32));
  swiglu_kernel<<<static_cast<unsigned>(p.rows), threads, 0, stream>>>(p);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
