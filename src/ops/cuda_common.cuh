// Shared device helpers of the CUDA kernels: bf16 loads and stores, warp and block reductions.
#pragma once

#include "ops/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace inflight::cuda {

using bf16 = __nv_bfloat16;
using bf16x2 = __nv_bfloat162;

__device__ __forceinline__ float to_f32(bf16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ bf16 to_bf16(float x) {
  return __float2bfloat16_rn(x);
}
__device__ __forceinline__ float2 to_f32x2(bf16x2 x) {
  return __bfloat1622float2(x);
}

// Sum (max) over the 32 lanes of a warp; every lane gets the result.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Sum over the whole block; every thread gets the result. blockDim.x must be a multiple of 32
// (at most 1024), and every thread of the block must call it.
// NOTE: ends with a barrier-protected read of shared memory, so two calls in a row are safe.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int num_warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // a previous call may still be reading `partial`
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < num_warps; ++w) total += partial[w];
  return total;
}

// Grid sizes: CUDA limits gridDim.y and gridDim.z to 65535.
constexpr int64_t kMaxGridX = 2147483647;
constexpr int64_t kMaxGridYZ = 65535;

}  // namespace inflight::cuda
