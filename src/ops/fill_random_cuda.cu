// fill_random on CUDA: one thread per element (grid-stride), the value of ops/fill_random.h
// computed in f32 and rounded once to the tensor's dtype. An 8B model's 16 GB of bf16 weights
// fill in well under a second.
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

template <typename T>
__global__ void fill_random_kernel(FillRandomParams p) {
  auto* out = static_cast<T*>(p.data);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel;
       i += stride) {
    const float v = fill_random_value(p, i);
    if constexpr (sizeof(T) == 4) {
      out[i] = v;
    } else {
      out[i] = cuda::to_bf16(v);
    }
  }
}

}  // namespace

void fill_random_cuda(const FillRandomParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.dtype == DType::kBF16 || p.dtype == DType::kF32, ErrorCode::kUnsupported,
                      "fill_random_cuda: bf16 or f32 only, got {}", dtype_name(p.dtype));
  if (p.numel == 0) return;
  constexpr int kThreads = 256;
  // Enough blocks to fill the device several times over; the grid-stride loop does the rest.
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>((p.numel + kThreads - 1) / kThreads, 1 << 16));
  if (p.dtype == DType::kF32) {
    fill_random_kernel<float><<<blocks, kThreads, 0, stream>>>(p);
  } else {
    fill_random_kernel<cuda::bf16><<<blocks, kThreads, 0, stream>>>(p);
  }
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
