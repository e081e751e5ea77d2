// quantize_fp8 on CUDA (ops/quantize_fp8.h): bf16 x -> e4m3 values + f32 scales, the same
// arithmetic as the CPU reference (scale = amax / 448, value = e4m3_satfinite(x * (1 / scale))).
//
// One block per output row (reading x's row x_rows[r] / x_row_div where x_rows is set). Per-row
// scales of rows that fit (k % 8 == 0, 16-byte aligned, up to cuda::kMaxRowColumns): the row is
// loaded once in 16-byte chunks and held in registers for the e4m3 pass (ops/fp8_rows.cuh).
// Other rows: 256 threads, a block-wide max, then a second pass over the row (it is in L1/L2 by
// then). Groups: each warp owns whole groups, a warp max per group.
#include "ops/cuda_common.cuh"
#include "ops/fp8_rows.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;
using cuda::e4m3_row_scale;
using cuda::to_e4m3;

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) quantize_fp8_kernel(QuantizeFp8Params p) {
  cuda::pdl_launch_dependents();
  cuda::pdl_wait();
  const int64_t r = blockIdx.x;
  const int64_t src = p.x_rows != nullptr ? p.x_rows[r] / p.x_row_div : r;
  const bf16* x = static_cast<const bf16*>(p.x) + src * p.k;
  uint8_t* out = p.values + r * p.k;
  if (p.group == 0) {
    float scale;
    if (p.static_scale != nullptr) {
      scale = *p.static_scale;
    } else {
      float amax = 0.0f;
      for (int64_t c = threadIdx.x; c < p.k; c += kThreads)
        amax = fmaxf(amax, fabsf(cuda::to_f32(x[c])));
      scale = e4m3_row_scale(cuda::block_max(amax));
    }
    const float inv = 1.0f / scale;
    for (int64_t c = threadIdx.x; c < p.k; c += kThreads)
      out[c] = to_e4m3(cuda::to_f32(x[c]) * inv);
    if (threadIdx.x == 0) p.scales[r] = scale;
    return;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t groups = (p.k + p.group - 1) / p.group;
  for (int64_t j = warp; j < groups; j += kThreads / 32) {
    const int64_t c0 = j * p.group, c1 = min(p.k, c0 + p.group);
    float amax = 0.0f;
    for (int64_t c = c0 + lane; c < c1; c += 32) amax = fmaxf(amax, fabsf(cuda::to_f32(x[c])));
    amax = cuda::warp_max(amax);
    const float scale = e4m3_row_scale(amax);
    const float inv = 1.0f / scale;
    for (int64_t c = c0 + lane; c < c1; c += 32) out[c] = to_e4m3(cuda::to_f32(x[c]) * inv);
    if (lane == 0) p.scales[j * p.m + r] = scale;
  }
}

__global__ void __launch_bounds__(cuda::kMaxRowThreads)
    quantize_fp8_row_kernel(QuantizeFp8Params p) {
  cuda::pdl_launch_dependents();
  cuda::pdl_wait();
  const int64_t r = blockIdx.x;
  const int64_t src = p.x_rows != nullptr ? p.x_rows[r] / p.x_row_div : r;
  const int chunks = static_cast<int>(p.k / 8), threads = static_cast<int>(blockDim.x);
  const auto* x = reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.x) + src * p.k);
  float v[cuda::kRowChunks][8];
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < cuda::kRowChunks; ++j) {
    const int c = static_cast<int>(threadIdx.x) + j * threads;
    if (c >= chunks) continue;
    cuda::unpack8(x[c], v[j]);
#pragma unroll
    for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(v[j][i]));
  }
  const float scale =
      p.static_scale != nullptr ? *p.static_scale : e4m3_row_scale(cuda::block_max(amax));
  const float inv = 1.0f / scale;
  auto* out = reinterpret_cast<uint2*>(p.values + r * p.k);
#pragma unroll
  for (int j = 0; j < cuda::kRowChunks; ++j) {
    const int c = static_cast<int>(threadIdx.x) + j * threads;
    if (c < chunks) out[c] = cuda::to_e4m3x8(v[j], inv);
  }
  if (threadIdx.x == 0) p.scales[r] = scale;
}

}  // namespace

void quantize_fp8_cuda(const QuantizeFp8Params& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.dtype == DType::kBF16, ErrorCode::kUnsupported,
                      "quantize_fp8_cuda: bf16 only, got {}", dtype_name(p.dtype));
  if (p.m == 0 || p.k == 0) return;
  INFLIGHT_CHECK(p.m <= cuda::kMaxGridX, "quantize_fp8_cuda: {} rows exceed the grid", p.m);
  const auto rows = static_cast<unsigned>(p.m);
  if (p.group == 0 && p.k % 8 == 0 && p.k <= cuda::kMaxRowColumns && cuda::aligned(p.x, 16) &&
      cuda::aligned(p.values, 8)) {
    cuda::launch_pdl(quantize_fp8_row_kernel, rows, cuda::row_threads(p.k), 0, stream, p);
  } else {
    cuda::launch_pdl(quantize_fp8_kernel, rows, kThreads, 0, stream, p);
  }
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
