// gemm for a few rows (decode at small batch): y[m, n] = x[m, k] w[n, k]^T (+ bias), m <= 8,
// bf16 operands, fp32 accumulation, y bf16 or f32. Reading w is the whole cost (a batch-1 step
// of an 8B model reads 15 GB of weights and does almost no arithmetic), so the kernel is a
// streaming GEMV: one warp per row of w, 16-byte loads (8 weights per lane), kUnroll loads in
// flight per lane, weights loaded with the streaming cache hint so that x (a few KB, re-read by
// every warp) stays in L1; each lane's partial dot products are reduced with shuffles.
//
// The backend picks this kernel or cuBLASLt per shape by timing both once (CublasLtGemm).
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kWarpsPerBlock = 8;
constexpr int kUnroll = 4;

__device__ __forceinline__ void unpack(const uint4& v, float (&out)[8]) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

template <int M, typename Y>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gemv_kernel(GemmParams p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (row >= p.n) return;          // the whole warp leaves together
  const int64_t chunks = p.k / 8;  // 16-byte chunks per row
  const auto* w = reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.w) + row * p.k);
  const auto* x = reinterpret_cast<const uint4*>(p.x);
  float acc[M];
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = 0.0f;
  for (int64_t base = lane; base < chunks; base += 32 * kUnroll) {
    uint4 wv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = base + 32 * u;
      wv[u] = c < chunks ? __ldcs(w + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = base + 32 * u;
      if (c >= chunks) break;
      float wf[8];
      unpack(wv[u], wf);
#pragma unroll
      for (int r = 0; r < M; ++r) {
        float xf[8];
        unpack(__ldg(x + r * chunks + c), xf);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[r] = fmaf(wf[i], xf[i], acc[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = cuda::warp_sum(acc[r]);
  if (lane == 0) {
    const float b = p.bias != nullptr ? cuda::to_f32(static_cast<const bf16*>(p.bias)[row]) : 0.0f;
#pragma unroll
    for (int r = 0; r < M; ++r) {
      if constexpr (sizeof(Y) == 4) {
        static_cast<float*>(p.y)[r * p.n + row] = acc[r] + b;
      } else {
        static_cast<bf16*>(p.y)[r * p.n + row] = cuda::to_bf16(acc[r] + b);
      }
    }
  }
}

template <typename Y>
void launch(const GemmParams& p, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((p.n + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const int threads = kWarpsPerBlock * 32;
  switch (p.m) {
    case 1:
      gemv_kernel<1, Y><<<blocks, threads, 0, stream>>>(p);
      break;
    case 2:
      gemv_kernel<2, Y><<<blocks, threads, 0, stream>>>(p);
      break;
    case 3:
      gemv_kernel<3, Y><<<blocks, threads, 0, stream>>>(p);
      break;
    case 4:
      gemv_kernel<4, Y><<<blocks, threads, 0, stream>>>(p);
      break;
    case 5:
      gemv_kernel<5, Y><<<blocks, threads, 0, stream>>>(p);
      break;
    case 6:
      gemv_kernel<6, Y><<<blocks, threads, 0, stream>>>(p);
      break;
    case 7:
      gemv_kernel<7, Y><<<blocks, threads, 0, stream>>>(p);
      break;
    default:
      gemv_kernel<8, Y><<<blocks, threads, 0, stream>>>(p);
      break;
  }
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

bool aligned16(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
}

}  // namespace

bool gemv_cuda_supported(const GemmParams& p) {
  return p.dtype == DType::kBF16 && (p.y_dtype == DType::kBF16 || p.y_dtype == DType::kF32) &&
         p.m >= 1 && p.m <= kGemvMaxRows && p.k % 8 == 0 && aligned16(p.x) && aligned16(p.w) &&
         p.n / kWarpsPerBlock < cuda::kMaxGridX;
}

void gemv_cuda(const GemmParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(gemv_cuda_supported(p), ErrorCode::kUnsupported,
                      "gemv_cuda: needs bf16 operands, 1 <= m <= {}, k % 8 == 0 and 16-byte "
                      "aligned x and w (m={} n={} k={})",
                      kGemvMaxRows, p.m, p.n, p.k);
  if (p.n == 0) return;
  if (p.y_dtype == DType::kF32) {
    launch<float>(p, stream);
  } else {
    launch<bf16>(p, stream);
  }
}

}  // namespace inflight
