// layer_norm on CUDA (bf16 in/out, fp32 statistics), fused with the residual add:
//
//   residual[r] <- bf16(residual[r] + add[r])      (when add is set)
//   out[r]      <- bf16((residual[r] - mean) * rsqrt(var + eps) * weight (+ bias))
//
// One block per row, three passes over it: the add and the sum, the centred squares (two-pass
// variance, as PyTorch's LayerNorm is exact for rows with a large mean), the output. The
// statistics are taken over the residual as stored (rounded to bf16), so the next layer sees
// exactly the values that were normalised.
//
// Rows of up to kThreads * 8 * kMaxChunks elements (dim % 8 == 0, 16-byte aligned) are held in
// registers (ops/norm_rows.cuh): one memory latency a row. Other rows take the scalar loops,
// where each thread re-reads only the elements it wrote, so the barriers inside block_sum are
// all the passes need.
#include "ops/cuda_common.cuh"
#include "ops/norm_rows.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) layer_norm_kernel(LayerNormParams lp) {
  cuda::pdl_launch_dependents();  // see ops_cuda.cuh: launched with PDL
  cuda::pdl_wait();
  const RmsNormParams& p = lp.norm;
  const int64_t row = blockIdx.x;
  const int64_t dim = p.dim;
  bf16* residual = static_cast<bf16*>(p.residual) + row * dim;
  const bf16* add = p.add != nullptr ? static_cast<const bf16*>(p.add) + row * dim : nullptr;
  const auto* weight = static_cast<const bf16*>(p.weight);
  const auto* bias = static_cast<const bf16*>(lp.bias);
  bf16* out = static_cast<bf16*>(p.out) + row * dim;

  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float x = cuda::to_f32(residual[i]);
    if (add != nullptr) {
      const bf16 r = cuda::to_bf16(x + cuda::to_f32(add[i]));
      residual[i] = r;
      x = cuda::to_f32(r);
    }
    sum += x;
  }
  const float mean = cuda::block_sum(sum) / static_cast<float>(dim);
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float d = cuda::to_f32(residual[i]) - mean;
    sum_sq += d * d;
  }
  const float inv_std = rsqrtf(cuda::block_sum(sum_sq) / static_cast<float>(dim) + p.eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float b = bias != nullptr ? cuda::to_f32(bias[i]) : 0.0f;
    out[i] =
        cuda::to_bf16((cuda::to_f32(residual[i]) - mean) * inv_std * cuda::to_f32(weight[i]) + b);
  }
}

constexpr int kMaxChunks = 4;  // uint4 chunks per thread: rows up to 8192 elements

__global__ void __launch_bounds__(kThreads) layer_norm_vec_kernel(LayerNormParams lp) {
  cuda::pdl_launch_dependents();  // see ops_cuda.cuh: launched with PDL
  cuda::pdl_wait();
  const RmsNormParams& p = lp.norm;
  const int64_t row = blockIdx.x;
  const int64_t chunks = p.dim / 8;
  const auto* weight = reinterpret_cast<const uint4*>(p.weight);
  const auto* bias = reinterpret_cast<const uint4*>(lp.bias);
  auto* out = reinterpret_cast<uint4*>(static_cast<bf16*>(p.out) + row * p.dim);

  float x[kMaxChunks][8];
  cuda::load_residual_row<kThreads>(p, row, x);
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxChunks; ++j) {
    if (threadIdx.x + j * kThreads >= chunks) continue;
#pragma unroll
    for (int i = 0; i < 8; ++i) sum += x[j][i];
  }
  const float mean = cuda::block_sum(sum) / static_cast<float>(p.dim);
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxChunks; ++j) {
    if (threadIdx.x + j * kThreads >= chunks) continue;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      x[j][i] -= mean;
      sum_sq += x[j][i] * x[j][i];
    }
  }
  const float inv_std = rsqrtf(cuda::block_sum(sum_sq) / static_cast<float>(p.dim) + p.eps);
#pragma unroll
  for (int j = 0; j < kMaxChunks; ++j) {
    const int64_t c = threadIdx.x + j * kThreads;
    if (c >= chunks) continue;
    float w[8], b[8] = {};
    cuda::unpack8(weight[c], w);
    if (bias != nullptr) cuda::unpack8(bias[c], b);
    uint4 result;
    auto* r2 = reinterpret_cast<cuda::bf16x2*>(&result);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      r2[i] = __halves2bfloat162(
          cuda::to_bf16(x[j][2 * i] * inv_std * w[2 * i] + b[2 * i]),
          cuda::to_bf16(x[j][2 * i + 1] * inv_std * w[2 * i + 1] + b[2 * i + 1]));
    }
    out[c] = result;
  }
}

}  // namespace

void layer_norm_cuda(const LayerNormParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.norm.dtype == DType::kBF16, ErrorCode::kUnsupported,
                      "layer_norm_cuda: bf16 only, got {}", dtype_name(p.norm.dtype));
  if (p.norm.rows == 0 || p.norm.dim == 0) return;
  INFLIGHT_CHECK(p.norm.rows <= cuda::kMaxGridX, "layer_norm_cuda: {} rows exceed the grid",
                 p.norm.rows);
  const RmsNormParams& n = p.norm;
  const bool vec = n.dim % 8 == 0 && n.dim <= int64_t{kThreads} * 8 * kMaxChunks &&
                   cuda::aligned(n.residual, 16) && cuda::aligned(n.weight, 16) &&
                   cuda::aligned(n.out, 16) && (n.add == nullptr || cuda::aligned(n.add, 16)) &&
                   (p.bias == nullptr || cuda::aligned(p.bias, 16));
  cuda::launch_pdl(vec ? layer_norm_vec_kernel : layer_norm_kernel, static_cast<unsigned>(n.rows),
                   kThreads, 0, stream, p);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
