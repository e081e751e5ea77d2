// scaled_gemm for a few rows (FP8 decode at small batch, ops/scaled_gemm.h): m <= 8, e4m3 x
// with a scale per row (or the static one), e4m3 w with one scale or one per row, fp32 sums,
// y bf16 or f32. As the bf16 GEMV (gemv_cuda.cu): reading w is the whole cost, one byte per
// weight here, so one warp streams one row of w with 16-byte loads (16 weights per lane),
// kUnroll loads in flight per lane and the streaming cache hint; x (m * k bytes) stays in L1.
// Each pair of e4m3 values widens to f32 through the hardware's e4m3x2 -> f16x2 conversion;
// products of e4m3 values are exact in f32. Launched with PDL (ops_cuda.cuh) like the GEMV.
//
// The backend times it against cuBLASLt once per shape and keeps the faster (CublasLtGemm).
#include <cuda_fp8.h>

#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kWarpsPerBlock = 8;
constexpr int kUnroll = 4;

// 16 e4m3 values -> f32.
__device__ __forceinline__ void widen(const uint4& v, float (&out)[16]) {
  const auto* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&v);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pairs[i], __NV_E4M3)));
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

template <int M, typename Y>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) scaled_gemv_kernel(ScaledGemmParams p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  const int64_t chunks = p.k / 16;  // 16-byte chunks per row
  const auto* w = reinterpret_cast<const uint4*>(p.w + min(row, p.n - 1) * p.k);
  const auto* x = reinterpret_cast<const uint4*>(p.x);
  float acc[M];
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = 0.0f;
  uint4 wv[kUnroll];
  auto load = [&](int64_t base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = base + 32 * u;
      wv[u] = c < chunks ? __ldcs(w + c) : make_uint4(0, 0, 0, 0);
    }
  };
  auto consume = [&](int64_t base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = base + 32 * u;
      if (c >= chunks) break;
      float wf[16];
      widen(wv[u], wf);
#pragma unroll
      for (int r = 0; r < M; ++r) {
        float xf[16];
        widen(__ldg(x + r * chunks + c), xf);
#pragma unroll
        for (int i = 0; i < 16; ++i) acc[r] = fmaf(wf[i], xf[i], acc[r]);
      }
    }
  };
  // The first weights are in flight while the kernel before (the producer of x) finishes.
  load(lane);
  cuda::pdl_wait();
  consume(lane);
  for (int64_t base = lane + 32 * kUnroll; base < chunks; base += 32 * kUnroll) {
    load(base);
    consume(base);
  }
  cuda::pdl_launch_dependents();
  if (row >= p.n) return;  // the whole warp leaves together
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = cuda::warp_sum(acc[r]);
  if (lane == 0) {
    const float sw = p.w_scales[p.w_scale_rows == 0 ? 0 : row];
#pragma unroll
    for (int r = 0; r < M; ++r) {
      const float v = acc[r] * (p.x_scales[r] * sw);
      if constexpr (sizeof(Y) == 4) {
        const float b = p.bias != nullptr ? static_cast<const float*>(p.bias)[row] : 0.0f;
        static_cast<float*>(p.y)[r * p.n + row] = v + b;
      } else {
        const float b =
            p.bias != nullptr ? cuda::to_f32(static_cast<const bf16*>(p.bias)[row]) : 0.0f;
        static_cast<bf16*>(p.y)[r * p.n + row] = cuda::to_bf16(v + b);
      }
    }
  }
}

template <typename Y>
void launch(const ScaledGemmParams& p, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((p.n + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const int threads = kWarpsPerBlock * 32;
  auto go = [&](auto kernel) { cuda::launch_pdl(kernel, blocks, threads, 0, stream, p); };
  switch (p.m) {
    case 1:
      go(scaled_gemv_kernel<1, Y>);
      break;
    case 2:
      go(scaled_gemv_kernel<2, Y>);
      break;
    case 3:
      go(scaled_gemv_kernel<3, Y>);
      break;
    case 4:
      go(scaled_gemv_kernel<4, Y>);
      break;
    case 5:
      go(scaled_gemv_kernel<5, Y>);
      break;
    case 6:
      go(scaled_gemv_kernel<6, Y>);
      break;
    case 7:
      go(scaled_gemv_kernel<7, Y>);
      break;
    default:
      go(scaled_gemv_kernel<8, Y>);
      break;
  }
}

}  // namespace

bool scaled_gemv_cuda_supported(const ScaledGemmParams& p) {
  return (p.y_dtype == DType::kBF16 || p.y_dtype == DType::kF32) && p.m >= 1 &&
         p.m <= kGemvMaxRows && p.group == 0 && (p.w_scale_rows == 0 || p.w_scale_rows == 1) &&
         p.k % 16 == 0 && cuda::aligned(p.x, 16) && cuda::aligned(p.w, 16) &&
         p.n / kWarpsPerBlock < cuda::kMaxGridX;
}

void scaled_gemv_cuda(const ScaledGemmParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(scaled_gemv_cuda_supported(p), ErrorCode::kUnsupported,
                      "scaled_gemv_cuda: needs 1 <= m <= {}, per-tensor or per-row weight "
                      "scales, row activation scales, k % 16 == 0 and 16-byte aligned x and w "
                      "(m={} n={} k={})",
                      kGemvMaxRows, p.m, p.n, p.k);
  if (p.n == 0) return;
  if (p.y_dtype == DType::kF32) {
    launch<float>(p, stream);
  } else {
    launch<bf16>(p, stream);
  }
}

}  // namespace inflight
