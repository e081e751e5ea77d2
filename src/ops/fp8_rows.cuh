// Dynamic per-row e4m3 quantization (ops/quantize_fp8.h, group 0) for kernels whose block owns
// a whole row: quantize_fp8 itself, and RMSNorm and SwiGLU when they also write their output
// quantized for the FP8 GEMM that reads it (one pass instead of two).
//
//   scale = amax(row) / 448 (1 for an all-zero row),  value = e4m3_satfinite(x * (1 / scale))
//
// The fused kernels quantize the bf16 values they store, so their e4m3 output is bit for bit
// what quantize_fp8 makes of their bf16 output.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "ops/cuda_common.cuh"

namespace inflight::cuda {

constexpr float kE4M3Max = 448.0f;

__device__ __forceinline__ uint8_t to_e4m3(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

__device__ __forceinline__ float e4m3_row_scale(float amax) {
  return amax > 0.0f ? amax / kE4M3Max : 1.0f;
}

// 8 values times `inv` as 8 e4m3 bytes (little-endian in a uint2), converted in pairs (one
// cvt.satfinite.e4m3x2 each; the same bytes as to_e4m3 one by one).
__device__ __forceinline__ uint2 to_e4m3x8(const float (&v)[8], float inv) {
  uint32_t word[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * h] * inv, v[4 * h + 1] * inv),
                                                 __NV_SATFINITE, __NV_E4M3);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(
        make_float2(v[4 * h + 2] * inv, v[4 * h + 3] * inv), __NV_SATFINITE, __NV_E4M3);
    word[h] = lo | (hi << 16);
  }
  return make_uint2(word[0], word[1]);
}

// Rows held in registers (a block per row, kRowChunks chunks of 8 columns a thread, loaded at
// once): the block has just enough threads for the row, from 128 up to kMaxRowThreads, so that
// few registers per thread let several rows share an SM. Rows of up to kMaxRowColumns.
constexpr int kRowChunks = 4;
constexpr int kMaxRowThreads = 1024;
constexpr int64_t kMaxRowColumns = int64_t{kMaxRowThreads} * 8 * kRowChunks;  // 32,768

inline int row_threads(int64_t columns) {
  int threads = 128;
  while (int64_t{threads} * 8 * kRowChunks < columns) threads *= 2;
  return threads;
}

}  // namespace inflight::cuda
