// rms_norm on CUDA (bf16 in/out, fp32 statistics), fused with the residual add:
//
//   residual[r] <- bf16(residual[r] + add[r])      (when add is set)
//   out[r]      <- bf16(residual[r] * rsqrt(mean(residual[r]^2) + eps) * weight)
//
// One block per row. The statistics are taken over the residual as stored (rounded to bf16),
// so the next layer sees exactly the values that were normalised.
//
// Rows of up to kThreads * 8 * kMaxChunks elements (dim % 8 == 0, 16-byte aligned) are held in
// registers (ops/norm_rows.cuh): one memory latency a row, not one per element stride. Other
// rows take the scalar loop, where each thread re-reads in the second pass the elements it
// wrote in the first, so no barrier is needed between the passes beyond the one inside
// block_sum.
//
// With q_values set the row is also quantized to e4m3 with a dynamic per-row scale, as
// quantize_fp8 would quantize `out` (ops/fp8_rows.cuh): a block max over the stored bf16
// values, then their e4m3 bytes, where the FP8 GEMM after the norm would otherwise need a pass
// of its own; rows held in registers skip the bf16 store when only q is read (skip_out).
#include "ops/cuda_common.cuh"
#include "ops/fp8_rows.cuh"
#include "ops/norm_rows.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kThreads = 256;

template <bool kQuantize>
__global__ void __launch_bounds__(kThreads) rms_norm_kernel(RmsNormParams p) {
  cuda::pdl_launch_dependents();  // see ops_cuda.cuh: launched with PDL
  cuda::pdl_wait();
  const int64_t row = blockIdx.x;
  const int64_t dim = p.dim;
  bf16* residual = static_cast<bf16*>(p.residual) + row * dim;
  const bf16* add = p.add != nullptr ? static_cast<const bf16*>(p.add) + row * dim : nullptr;
  const auto* weight = static_cast<const bf16*>(p.weight);
  bf16* out = static_cast<bf16*>(p.out) + row * dim;

  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float x = cuda::to_f32(residual[i]);
    if (add != nullptr) {
      const bf16 r = cuda::to_bf16(x + cuda::to_f32(add[i]));
      residual[i] = r;
      x = cuda::to_f32(r);
    }
    sum_sq += x * x;
  }
  sum_sq = cuda::block_sum(sum_sq);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(dim) + p.eps);
  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const bf16 y = cuda::to_bf16(cuda::to_f32(residual[i]) * inv_rms * cuda::to_f32(weight[i]));
    out[i] = y;
    if constexpr (kQuantize) amax = fmaxf(amax, fabsf(cuda::to_f32(y)));
  }
  if constexpr (kQuantize) {
    const float scale = cuda::e4m3_row_scale(cuda::block_max(amax));
    const float inv = 1.0f / scale;
    uint8_t* q = p.q_values + row * dim;
    // Each thread reads back the elements it stored above.
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      q[i] = cuda::to_e4m3(cuda::to_f32(out[i]) * inv);
    }
    if (threadIdx.x == 0) p.q_scales[row] = scale;
  }
}

constexpr int kMaxChunks = 4;  // uint4 chunks per thread: rows up to 8192 elements

template <bool kQuantize>
__global__ void __launch_bounds__(kThreads) rms_norm_vec_kernel(RmsNormParams p) {
  cuda::pdl_launch_dependents();  // see ops_cuda.cuh: launched with PDL
  cuda::pdl_wait();
  const int64_t row = blockIdx.x;
  const int64_t chunks = p.dim / 8;
  const auto* weight = reinterpret_cast<const uint4*>(p.weight);
  auto* out = reinterpret_cast<uint4*>(static_cast<bf16*>(p.out) + row * p.dim);

  float x[kMaxChunks][8];
  cuda::load_residual_row<kThreads>(p, row, x);
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxChunks; ++j) {
    if (threadIdx.x + j * kThreads >= chunks) continue;
#pragma unroll
    for (int i = 0; i < 8; ++i) sum_sq += x[j][i] * x[j][i];
  }
  sum_sq = cuda::block_sum(sum_sq);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(p.dim) + p.eps);
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxChunks; ++j) {
    const int64_t c = threadIdx.x + j * kThreads;
    if (c >= chunks) continue;
    float w[8];
    cuda::unpack8(weight[c], w);
    uint4 result;
    auto* r2 = reinterpret_cast<__nv_bfloat162*>(&result);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      r2[i] = __halves2bfloat162(cuda::to_bf16(x[j][2 * i] * inv_rms * w[2 * i]),
                                 cuda::to_bf16(x[j][2 * i + 1] * inv_rms * w[2 * i + 1]));
    }
    if (!kQuantize || !p.skip_out) out[c] = result;
    if constexpr (kQuantize) {
      cuda::unpack8(result, x[j]);  // the stored values: what quantize_fp8 would read
#pragma unroll
      for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(x[j][i]));
    }
  }
  if constexpr (kQuantize) {
    const float scale = cuda::e4m3_row_scale(cuda::block_max(amax));
    const float inv = 1.0f / scale;
    auto* q = reinterpret_cast<uint2*>(p.q_values + row * p.dim);
#pragma unroll
    for (int j = 0; j < kMaxChunks; ++j) {
      const int64_t c = threadIdx.x + j * kThreads;
      if (c < chunks) q[c] = cuda::to_e4m3x8(x[j], inv);
    }
    if (threadIdx.x == 0) p.q_scales[row] = scale;
  }
}

}  // namespace

void rms_norm_cuda(const RmsNormParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.dtype == DType::kBF16, ErrorCode::kUnsupported,
                      "rms_norm_cuda: bf16 only, got {}", dtype_name(p.dtype));
  if (p.rows == 0 || p.dim == 0) return;
  INFLIGHT_CHECK(p.rows <= cuda::kMaxGridX, "rms_norm_cuda: {} rows exceed the grid", p.rows);
  const bool vec = p.dim % 8 == 0 && p.dim <= int64_t{kThreads} * 8 * kMaxChunks &&
                   cuda::aligned(p.residual, 16) && cuda::aligned(p.weight, 16) &&
                   cuda::aligned(p.out, 16) && (p.add == nullptr || cuda::aligned(p.add, 16));
  const auto rows = static_cast<unsigned>(p.rows);
  const bool quantize = p.q_values != nullptr;
  if (vec && (!quantize || cuda::aligned(p.q_values, 8))) {
    cuda::launch_pdl(quantize ? rms_norm_vec_kernel<true> : rms_norm_vec_kernel<false>, rows,
                     kThreads, 0, stream, p);
  } else {
    cuda::launch_pdl(quantize ? rms_norm_kernel<true> : rms_norm_kernel<false>, rows, kThreads, 0,
                     stream, p);
  }
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
