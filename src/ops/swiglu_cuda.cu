// swiglu on CUDA (bf16 in/out, fp32 math):
//   out[r, i] = bf16(silu(gate_up[r, i]) * gate_up[r, inter + i]),  silu(g) = g / (1 + exp(-g))
//
// A flat grid over rows x columns, 8 columns per thread with 16-byte loads and stores when the
// row length and the pointers allow (else one column per thread). A decode step of batch 1 has a
// single row of 14336 columns: spread over ~7 blocks it takes one load latency, where one block
// per row would walk it in 56 dependent rounds.
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 132 * 16;  // a few waves; the loop covers the rest

__device__ __forceinline__ float silu_mul(float g, float u) {
  return g / (1.0f + expf(-g)) * u;
}

template <int kWidth>  // columns per thread: 8 (uint4) or 1
__global__ void __launch_bounds__(kThreads) swiglu_kernel(SwigluParams p) {
  cuda::pdl_launch_dependents();  // see ops_cuda.cuh: launched with PDL
  cuda::pdl_wait();
  const int64_t per_row = p.inter / kWidth;
  const int64_t total = p.rows * per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < total;
       v += stride) {
    const int64_t row = v / per_row, col = (v % per_row) * kWidth;
    const bf16* gate = static_cast<const bf16*>(p.gate_up) + row * 2 * p.inter + col;
    const bf16* up = gate + p.inter;
    bf16* out = static_cast<bf16*>(p.out) + row * p.inter + col;
    if constexpr (kWidth == 8) {
      const uint4 gv = *reinterpret_cast<const uint4*>(gate);
      const uint4 uv = *reinterpret_cast<const uint4*>(up);
      const auto* g2 = reinterpret_cast<const __nv_bfloat162*>(&gv);
      const auto* u2 = reinterpret_cast<const __nv_bfloat162*>(&uv);
      uint4 ov;
      auto* o2 = reinterpret_cast<__nv_bfloat162*>(&ov);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 g = __bfloat1622float2(g2[i]), u = __bfloat1622float2(u2[i]);
        o2[i] = __halves2bfloat162(cuda::to_bf16(silu_mul(g.x, u.x)),
                                   cuda::to_bf16(silu_mul(g.y, u.y)));
      }
      *reinterpret_cast<uint4*>(out) = ov;
    } else {
      *out = cuda::to_bf16(silu_mul(cuda::to_f32(*gate), cuda::to_f32(*up)));
    }
  }
}

}  // namespace

void swiglu_cuda(const SwigluParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.dtype == DType::kBF16, ErrorCode::kUnsupported,
                      "swiglu_cuda: bf16 only, got {}", dtype_name(p.dtype));
  if (p.rows == 0 || p.inter == 0) return;
  const bool vec = p.inter % 8 == 0 && cuda::aligned(p.gate_up, 16) && cuda::aligned(p.out, 16);
  const int64_t items = p.rows * (vec ? p.inter / 8 : p.inter);
  const auto blocks =
      static_cast<unsigned>(std::min(kMaxBlocks, (items + kThreads - 1) / kThreads));
  if (vec) {
    cuda::launch_pdl(swiglu_kernel<8>, blocks, kThreads, 0, stream, p);
  } else {
    cuda::launch_pdl(swiglu_kernel<1>, blocks, kThreads, 0, stream, p);
  }
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
