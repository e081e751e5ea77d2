// The plain CUDA-core FP8 GEMM (ops/scaled_gemm.h): the fallback for shapes cuBLASLt has no FP8
// algorithm for, the batch-invariant mode's kernel, and a second GPU answer in tests.
//
// 16x16 output tiles per block of 16x16 threads, 16-column k tiles of x and w decoded from e4m3
// to f32 in shared memory. Each output accumulates one k-group at a time and adds it scaled by
// sx * sw, in k order, whatever m is (batch invariant), as the CPU reference does.
#include <cuda_fp8.h>

#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kTile = 16;

__device__ __forceinline__ float e4m3_f32(uint8_t v) {
  __nv_fp8_e4m3 f;
  f.__x = v;
  return static_cast<float>(f);
}

template <typename Y>
__global__ void __launch_bounds__(kTile* kTile) scaled_gemm_kernel(ScaledGemmParams p) {
  __shared__ float xs[kTile][kTile + 1];  // [m in tile][k in tile]
  __shared__ float ws[kTile][kTile + 1];  // [k in tile][n in tile]
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.y;  // m
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;  // n
  const int64_t w_row = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.y;
  const int64_t group = p.group == 0 ? p.k : p.group;
  float total = 0.0f, acc = 0.0f;
  for (int64_t k0 = 0; k0 < p.k; k0 += kTile) {
    const int64_t kx = k0 + threadIdx.x;
    xs[threadIdx.y][threadIdx.x] = row < p.m && kx < p.k ? e4m3_f32(p.x[row * p.k + kx]) : 0.0f;
    ws[threadIdx.x][threadIdx.y] = w_row < p.n && kx < p.k ? e4m3_f32(p.w[w_row * p.k + kx]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc += xs[threadIdx.y][kk] * ws[kk][threadIdx.x];
    __syncthreads();
    const int64_t k1 = k0 + kTile;
    // group is a multiple of kTile (128) or the whole row: a group ends on a tile boundary.
    if ((k1 % group == 0 || k1 >= p.k) && row < p.m && col < p.n) {
      const int64_t g = k0 / group;
      const float sx = p.x_scales[p.group == 0 ? row : g * p.m + row];
      const float sw = p.w_scale_rows == 0
                           ? p.w_scales[0]
                           : p.w_scales[(col / p.w_scale_rows) * (p.group == 0 ? 1 : p.w_scale_stride) +
                                        (p.group == 0 ? 0 : g)];
      total += acc * sx * sw;
      acc = 0.0f;
    }
  }
  if (row < p.m && col < p.n) {
    if constexpr (sizeof(Y) == 4) {
      if (p.bias != nullptr) total += static_cast<const float*>(p.bias)[col];
      static_cast<float*>(p.y)[row * p.n + col] = total;
    } else {
      if (p.bias != nullptr) total += cuda::to_f32(static_cast<const bf16*>(p.bias)[col]);
      static_cast<bf16*>(p.y)[row * p.n + col] = cuda::to_bf16(total);
    }
  }
}

}  // namespace

void scaled_gemm_cuda(const ScaledGemmParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.y_dtype == DType::kBF16 || p.y_dtype == DType::kF32,
                      ErrorCode::kUnsupported, "scaled_gemm_cuda: bf16 or f32 y only");
  INFLIGHT_CHECK_CODE(p.group == 0 || p.group % kTile == 0, ErrorCode::kUnsupported,
                      "scaled_gemm_cuda: groups of {} columns (a multiple of {} is needed)",
                      p.group, kTile);
  if (p.m == 0 || p.n == 0) return;
  const int64_t tiles_n = (p.n + kTile - 1) / kTile, tiles_m = (p.m + kTile - 1) / kTile;
  INFLIGHT_CHECK(tiles_n <= cuda::kMaxGridX && tiles_m <= cuda::kMaxGridYZ,
                 "scaled_gemm_cuda: {} x {} output is too large for the grid", p.m, p.n);
  const dim3 grid(static_cast<unsigned>(tiles_n), static_cast<unsigned>(tiles_m));
  if (p.y_dtype == DType::kF32) {
    scaled_gemm_kernel<float><<<grid, dim3(kTile, kTile), 0, stream>>>(p);
  } else {
    scaled_gemm_kernel<bf16><<<grid, dim3(kTile, kTile), 0, stream>>>(p);
  }
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
