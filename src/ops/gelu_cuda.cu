// gelu on CUDA (bf16 in/out, fp32 math): out = bf16(0.5 x (1 + erf(x / sqrt(2)))).
//
// A flat grid over the elements, 8 per thread with 16-byte loads and stores when the count and
// the pointers allow (else one per thread), as swiglu_cuda.cu: a decode step's single row of
// 16384 columns (MPT-7B) is spread over many blocks.
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 132 * 16;  // a few waves; the loop covers the rest

template <int kWidth>  // elements per thread: 8 (uint4) or 1
__global__ void __launch_bounds__(kThreads) gelu_kernel(GeluParams p) {
  cuda::pdl_launch_dependents();  // see ops_cuda.cuh: launched with PDL
  cuda::pdl_wait();
  const int64_t total = p.numel / kWidth;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < total;
       v += stride) {
    const bf16* x = static_cast<const bf16*>(p.x) + v * kWidth;
    bf16* out = static_cast<bf16*>(p.out) + v * kWidth;
    if constexpr (kWidth == 8) {
      const uint4 xv = *reinterpret_cast<const uint4*>(x);
      const auto* x2 = reinterpret_cast<const __nv_bfloat162*>(&xv);
      uint4 ov;
      auto* o2 = reinterpret_cast<__nv_bfloat162*>(&ov);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 f = __bfloat1622float2(x2[i]);
        o2[i] = __halves2bfloat162(cuda::to_bf16(cuda::gelu(f.x)), cuda::to_bf16(cuda::gelu(f.y)));
      }
      *reinterpret_cast<uint4*>(out) = ov;
    } else {
      *out = cuda::to_bf16(cuda::gelu(cuda::to_f32(*x)));
    }
  }
}

}  // namespace

void gelu_cuda(const GeluParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.dtype == DType::kBF16, ErrorCode::kUnsupported,
                      "gelu_cuda: bf16 only, got {}", dtype_name(p.dtype));
  if (p.numel == 0) return;
  const bool vec = p.numel % 8 == 0 && cuda::aligned(p.x, 16) && cuda::aligned(p.out, 16);
  const int64_t items = vec ? p.numel / 8 : p.numel;
  const auto blocks =
      static_cast<unsigned>(std::min(kMaxBlocks, (items + kThreads - 1) / kThreads));
  if (vec) {
    cuda::launch_pdl(gelu_kernel<8>, blocks, kThreads, 0, stream, p);
  } else {
    cuda::launch_pdl(gelu_kernel<1>, blocks, kThreads, 0, stream, p);
  }
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
