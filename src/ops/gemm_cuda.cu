// The plain CUDA-core GEMM: y[m, n] = sum_k x[m, k] w[n, k] (+ bias[n]), fp32 accumulation, y
// bf16 or f32.
//
// 16x16 output tiles per block of 16x16 threads; each step stages a 16x16 tile of x and of w in
// shared memory (w transposed on the way in, padded against bank conflicts). Slow but exact in
// the usual sense: the backend uses it only for shapes cuBLASLt has no algorithm for, and the
// tests use it as a second, independent GPU answer. Each output sums over k in one fixed order
// whatever m is, so a row's result does not depend on the rest of the batch: the backend's
// batch-invariant mode runs every GEMM here.
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kTile = 16;

template <typename Y>
__global__ void __launch_bounds__(kTile* kTile) gemm_kernel(GemmParams p) {
  __shared__ float xs[kTile][kTile + 1];  // [m in tile][k in tile]
  __shared__ float ws[kTile][kTile + 1];  // [k in tile][n in tile]
  const auto* x = static_cast<const bf16*>(p.x);
  const auto* w = static_cast<const bf16*>(p.w);
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.y;  // m
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;  // n
  const int64_t w_row = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.y;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < p.k; k0 += kTile) {
    const int64_t kx = k0 + threadIdx.x;
    xs[threadIdx.y][threadIdx.x] = row < p.m && kx < p.k ? cuda::to_f32(x[row * p.k + kx]) : 0.0f;
    ws[threadIdx.x][threadIdx.y] =
        w_row < p.n && kx < p.k ? cuda::to_f32(w[w_row * p.k + kx]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc += xs[threadIdx.y][kk] * ws[kk][threadIdx.x];
    __syncthreads();
  }
  if (row < p.m && col < p.n) {
    if (p.bias != nullptr) acc += cuda::to_f32(static_cast<const bf16*>(p.bias)[col]);
    if constexpr (sizeof(Y) == 4) {
      static_cast<float*>(p.y)[row * p.n + col] = acc;
    } else {
      static_cast<bf16*>(p.y)[row * p.n + col] = cuda::to_bf16(acc);
    }
  }
}

}  // namespace

void gemm_cuda(const GemmParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(
      p.dtype == DType::kBF16 && (p.y_dtype == DType::kBF16 || p.y_dtype == DType::kF32),
      ErrorCode::kUnsupported, "gemm_cuda: bf16 operands and bf16/f32 y only");
  if (p.m == 0 || p.n == 0) return;
  const int64_t tiles_n = (p.n + kTile - 1) / kTile, tiles_m = (p.m + kTile - 1) / kTile;
  INFLIGHT_CHECK(tiles_n <= cuda::kMaxGridX && tiles_m <= cuda::kMaxGridYZ,
                 "gemm_cuda: {} x {} output is too large for the grid", p.m, p.n);
  const dim3 grid(static_cast<unsigned>(tiles_n), static_cast<unsigned>(tiles_m));
  if (p.y_dtype == DType::kF32) {
    gemm_kernel<float><<<grid, dim3(kTile, kTile), 0, stream>>>(p);
  } else {
    gemm_kernel<bf16><<<grid, dim3(kTile, kTile), 0, stream>>>(p);
  }
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
