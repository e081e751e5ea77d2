// gemm for a few rows (decode at small batch): y[m, n] = x[m, k] w[n, k]^T (+ bias), m <= 8,
// bf16 operands, fp32 accumulation, y bf16 or f32. Reading w is the whole cost (a batch-1 step
// of an 8B model reads 15 GB of weights and does almost no arithmetic), so the kernel is a
// streaming GEMV: one warp per row of w, 16-byte loads (8 weights per lane), kUnroll loads in
// flight per lane, weights loaded with the streaming cache hint so that x (a few KB, re-read by
// every warp) stays in L1; each lane's partial dot products are reduced with shuffles. Launched
// with PDL (ops_cuda.cuh): the first kUnroll weight loads of every lane go out before the wait
// for the kernel that writes x, and the next kernel may launch once every weight is read.
//
// With the GELU epilogue (MPT's up projection) each sum goes through the exact GELU before its
// one rounding to bf16: the separate GELU kernel, and the bf16 rounding between, are saved.
//
// The backend picks this kernel or cuBLASLt per shape by timing both once (CublasLtGemm).
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kWarpsPerBlock = 8;
constexpr int kUnroll = 4;

template <int M, typename Y, bool kGelu>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gemv_kernel(GemmParams p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  const int64_t chunks = p.k / 8;  // 16-byte chunks per row
  const auto* w =
      reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.w) + min(row, p.n - 1) * p.k);
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
      float wf[8];
      cuda::unpack8(wv[u], wf);
#pragma unroll
      for (int r = 0; r < M; ++r) {
        float xf[8];
        cuda::unpack8(__ldg(x + r * chunks + c), xf);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[r] = fmaf(wf[i], xf[i], acc[r]);
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
  // Every weight is read: the next kernel may launch and wait for this one's stores.
  cuda::pdl_launch_dependents();
  if (row >= p.n) return;  // the whole warp leaves together
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = cuda::warp_sum(acc[r]);
  if (lane == 0) {
    const float b = p.bias != nullptr ? cuda::to_f32(static_cast<const bf16*>(p.bias)[row]) : 0.0f;
#pragma unroll
    for (int r = 0; r < M; ++r) {
      if constexpr (sizeof(Y) == 4) {
        static_cast<float*>(p.y)[r * p.n + row] = acc[r] + b;
      } else if constexpr (kGelu) {
        static_cast<bf16*>(p.y)[r * p.n + row] = cuda::to_bf16(cuda::gelu(acc[r] + b));
      } else {
        static_cast<bf16*>(p.y)[r * p.n + row] = cuda::to_bf16(acc[r] + b);
      }
    }
  }
}

template <typename Y, bool kGelu = false>
void launch(const GemmParams& p, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((p.n + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const int threads = kWarpsPerBlock * 32;
  auto go = [&](auto kernel) { cuda::launch_pdl(kernel, blocks, threads, 0, stream, p); };
  switch (p.m) {
    case 1:
      go(gemv_kernel<1, Y, kGelu>);
      break;
    case 2:
      go(gemv_kernel<2, Y, kGelu>);
      break;
    case 3:
      go(gemv_kernel<3, Y, kGelu>);
      break;
    case 4:
      go(gemv_kernel<4, Y, kGelu>);
      break;
    case 5:
      go(gemv_kernel<5, Y, kGelu>);
      break;
    case 6:
      go(gemv_kernel<6, Y, kGelu>);
      break;
    case 7:
      go(gemv_kernel<7, Y, kGelu>);
      break;
    default:
      go(gemv_kernel<8, Y, kGelu>);
      break;
  }
}

}  // namespace

bool gemv_cuda_supported(const GemmParams& p) {
  return p.dtype == DType::kBF16 && (p.y_dtype == DType::kBF16 || p.y_dtype == DType::kF32) &&
         p.m >= 1 && p.m <= kGemvMaxRows && p.k % 8 == 0 && cuda::aligned(p.x, 16) &&
         cuda::aligned(p.w, 16) && p.n / kWarpsPerBlock < cuda::kMaxGridX;
}

void gemv_cuda(const GemmParams& p, cudaStream_t stream, GemmEpilogue epilogue) {
  INFLIGHT_CHECK_CODE(gemv_cuda_supported(p), ErrorCode::kUnsupported,
                      "gemv_cuda: needs bf16 operands, 1 <= m <= {}, k % 8 == 0 and 16-byte "
                      "aligned x and w (m={} n={} k={})",
                      kGemvMaxRows, p.m, p.n, p.k);
  INFLIGHT_CHECK_CODE(epilogue == GemmEpilogue::kNone || p.y_dtype == DType::kBF16,
                      ErrorCode::kUnsupported, "gemv_cuda: the GELU epilogue writes bf16 only");
  if (p.n == 0) return;
  if (p.y_dtype == DType::kF32) {
    launch<float>(p, stream);
  } else if (epilogue == GemmEpilogue::kGelu) {
    launch<bf16, true>(p, stream);
  } else {
    launch<bf16>(p, stream);
  }
}

}  // namespace inflight
