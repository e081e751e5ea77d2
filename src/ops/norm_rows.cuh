// A row of a normalization (RMSNorm, LayerNorm) held in registers by one block: thread t of
// kThreads owns the row's 16-byte chunks t, t + kThreads, ... (8 bf16 each, kChunks at most),
// so a row costs one memory latency: every thread issues all its loads before using any (a
// decode step of batch 1 is a single row, so latency is all there is).
#pragma once

#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight::cuda {

// x <- row `row` of p.residual ([rows, p.dim] bf16, p.dim % 8 == 0) as f32; with p.add set,
// residual <- bf16(residual + add) first (stored back) and x the stored values. Chunks at or
// past p.dim / 8 are left untouched.
template <int kThreads, int kChunks>
__device__ __forceinline__ void load_residual_row(const RmsNormParams& p, int64_t row,
                                                  float (&x)[kChunks][8]) {
  const int64_t chunks = p.dim / 8;
  auto* residual = reinterpret_cast<uint4*>(static_cast<bf16*>(p.residual) + row * p.dim);
  const auto* add =
      p.add != nullptr
          ? reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.add) + row * p.dim)
          : nullptr;
  uint4 loaded[kChunks], added[kChunks];
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int64_t c = threadIdx.x + j * kThreads;
    if (c < chunks) {
      loaded[j] = residual[c];
      if (add != nullptr) added[j] = add[c];
    }
  }
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int64_t c = threadIdx.x + j * kThreads;
    if (c >= chunks) continue;
    unpack8(loaded[j], x[j]);
    if (add == nullptr) continue;
    float a[8];
    unpack8(added[j], a);
    uint4 stored;
    auto* s2 = reinterpret_cast<bf16x2*>(&stored);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const bf16 lo = to_bf16(x[j][2 * i] + a[2 * i]);
      const bf16 hi = to_bf16(x[j][2 * i + 1] + a[2 * i + 1]);
      s2[i] = __halves2bfloat162(lo, hi);
      x[j][2 * i] = to_f32(lo);
      x[j][2 * i + 1] = to_f32(hi);
    }
    residual[c] = stored;
  }
}

}  // namespace inflight::cuda
