// Shared helpers of the CUDA kernels: bf16 conversions, warp and block reductions, programmatic
// dependent launch; on the host, cached device attributes, alignment checks and launch setup.
#pragma once

#include "ops/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>

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

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduce v over the whole block with `op` (associative, commutative); every thread gets the
// result, combined in a fixed order (warps by butterfly, then warp 0..n-1), so the same inputs
// give the same bits. blockDim.x must be a multiple of 32 (at most 1024), and every thread of
// the block must call it.
// NOTE: ends with a barrier-protected read of shared memory, so two calls in a row are safe.
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, Op op) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int num_warps = blockDim.x / 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  __syncthreads();  // a previous call may still be reading `partial`
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = partial[0];
  for (int w = 1; w < num_warps; ++w) total = op(total, partial[w]);
  return total;
}

__device__ __forceinline__ float block_sum(float v) {
  return block_reduce(v, SumOp{});
}
__device__ __forceinline__ float block_max(float v) {
  return block_reduce(v, MaxOp{});
}

// The 8 bf16 values of a 16-byte chunk, widened to f32.
__device__ __forceinline__ void unpack8(const uint4& v, float* out) {
  const auto* h = reinterpret_cast<const bf16x2*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// Programmatic dependent launch (sm_90): a kernel started by launch_pdl may begin while the
// kernel before it in the stream is still running, as soon as every block of that one has
// called pdl_launch_dependents() (or exited). Before pdl_wait() returns, which is when the
// previous kernel has completed and its writes are visible, such a kernel may only read memory
// that no kernel of the step writes (weights) and must write nothing; it must call pdl_wait()
// even if it reads nothing, so that its own completion still implies its predecessors'. On a
// kernel launched without the attribute both are no-ops.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// An attribute of the current device, cached per device (devices past 63 are asked each time).
template <cudaDeviceAttr kAttribute>
int device_attribute() {
  static std::atomic<int> cached[64] = {};  // 0: not asked yet
  int device = 0;
  INFLIGHT_CUDA_CHECK(cudaGetDevice(&device));
  int value = device < 64 ? cached[device].load(std::memory_order_relaxed) : 0;
  if (value == 0) {
    INFLIGHT_CUDA_CHECK(cudaDeviceGetAttribute(&value, kAttribute, device));
    if (device < 64) cached[device].store(value, std::memory_order_relaxed);
  }
  return value;
}
inline int compute_capability_major() {
  return device_attribute<cudaDevAttrComputeCapabilityMajor>();
}
inline int num_sms() {
  return device_attribute<cudaDevAttrMultiProcessorCount>();
}

// The exact GELU, 0.5 x (1 + erf(x / sqrt(2))) (MPT's MLP activation).
__device__ __forceinline__ float gelu(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

// Raises a kernel's dynamic shared-memory limit to kBytes, once per device (0-63).
template <auto kKernel, int kBytes>
void allow_dynamic_smem() {
  static std::atomic<uint64_t> done{0};
  int device = 0;
  INFLIGHT_CUDA_CHECK(cudaGetDevice(&device));
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit != 0 && (done.load(std::memory_order_relaxed) & bit) != 0) return;
  INFLIGHT_CUDA_CHECK(
      cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
  done.fetch_or(bit, std::memory_order_relaxed);
}

// Whether `ptr` is a multiple of `bytes` (vector loads and stores, cp.async).
inline bool aligned(const void* ptr, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

// Whether launch_pdl allows programmatic dependent launch: the device has it (compute capability
// 9.0+) and the environment does not turn it off (INFLIGHT_PDL=0, for A/B measurements).
inline bool pdl_supported() {
  static const bool enabled = [] {
    const char* value = std::getenv("INFLIGHT_PDL");
    return value == nullptr || std::string_view(value) != "0";
  }();
  return enabled && compute_capability_major() >= 9;
}

// kernel<<<grid, block, smem, stream>>>(args...) with programmatic dependent launch allowed
// where the device has it.
template <typename... Params, typename... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = pdl_supported() ? 1 : 0;
  INFLIGHT_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// Grid sizes: CUDA limits gridDim.y and gridDim.z to 65535.
constexpr int64_t kMaxGridX = 2147483647;
constexpr int64_t kMaxGridYZ = 65535;

}  // namespace inflight::cuda
