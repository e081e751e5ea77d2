// gemm for a few rows (decode at small batch): y[m, n] = x[m, k] w[n, k]^T (+ bias), m <= 8,
// bf16 operands, fp32 accumulation, y bf16 or f32. Reading w is the whole cost (a batch-1 step
// of an 8B model reads 15 GB of weights and does almost no arithmetic), so the kernel streams w
// and spends as few instructions per byte as it can: the tensor cores do the dot products.
//
// A warp owns 16 rows of w (and with kSplit warps per block, 1/kSplit of their k range). Per
// step of 32 columns, lane (g = lane / 4, t = lane % 4) loads 16 bytes of row g and 16 bytes of
// row g + 8 at chunk 4 s + t, and 16 bytes of x row g (the batch index; zero for g >= m) at the
// same chunk, and issues two mma.m16n8k16: the first takes the chunk's elements 0-3, the second
// 4-7, as the A fragment (rows g and g + 8, logical k 2t, 2t + 1, 2t + 8, 2t + 9) and the B
// fragment (column g, the same logical k). Every row and x use the same map from logical k to
// column, so the products sum over all columns: w and x are read in their natural layout. C
// holds y for rows g and g + 8, batch 2t and 2t + 1; the kSplit warps' C meet in shared memory.
// Per kilobyte of w a lane issues 2 weight loads and 2 mma (plus the x load of lanes g < m),
// where a warp-per-row CUDA-core GEMV needs ~30 instructions. kUnroll steps are in flight per
// lane; weights are loaded with the streaming cache hint so that x stays in L1. Launched with
// PDL (ops_cuda.cuh): the first weight loads go out before the wait for the kernel that writes
// x, and the next kernel may launch once every weight is read.
//
// The backend picks this kernel or cuBLASLt per shape by timing both once (CublasLtGemm).
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kRowsPerWarp = 16;
constexpr int kUnroll = 4;  // steps of 32 columns in flight per lane

// C += A B for one m16n8k16 tile: a = rows g, g + 8 at logical k (2t, 2t + 1) and
// (2t + 8, 2t + 9); b = column g at the same k.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// Grid: ceil(n / 16) blocks of kSplit warps; warp w of a block takes steps [w S / kSplit,
// (w + 1) S / kSplit) of the S = ceil(k / 32) steps of its 16 rows.
template <int kSplit, typename Y>
__global__ void __launch_bounds__(kSplit * 32) gemv_kernel(GemmParams p) {
  __shared__ float partial[kSplit][kRowsPerWarp][8];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRowsPerWarp;
  const int64_t chunks = p.k / 8;  // 16-byte chunks per row
  const int64_t steps = (chunks + 3) / 4;
  const int64_t first = steps * warp / kSplit, last = steps * (warp + 1) / kSplit;
  const auto* wa =
      reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.w) + min(row0 + g, p.n - 1) * p.k);
  const auto* wb = reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.w) +
                                                  min(row0 + g + 8, p.n - 1) * p.k);
  const bool has_x = g < p.m;
  const auto* x =
      reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.x) + (has_x ? g : 0) * p.k);
  const uint4 zero = make_uint4(0, 0, 0, 0);
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  uint4 va[kUnroll], vb[kUnroll], vx[kUnroll];
  auto load_w = [&](int64_t s0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t ch = (s0 + u) * 4 + t;
      const bool ok = s0 + u < last && ch < chunks;
      va[u] = ok ? __ldcs(wa + ch) : zero;
      vb[u] = ok ? __ldcs(wb + ch) : zero;
    }
  };
  auto consume = [&](int64_t s0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t ch = (s0 + u) * 4 + t;
      vx[u] = has_x && s0 + u < last && ch < chunks ? __ldg(x + ch) : zero;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      mma_bf16(c, va[u].x, vb[u].x, va[u].y, vb[u].y, vx[u].x, vx[u].y);
      mma_bf16(c, va[u].z, vb[u].z, va[u].w, vb[u].w, vx[u].z, vx[u].w);
    }
  };
  // The first weights are in flight while the kernel before (the producer of x) finishes.
  load_w(first);
  cuda::pdl_wait();
  consume(first);
  for (int64_t s0 = first + kUnroll; s0 < last; s0 += kUnroll) {
    load_w(s0);
    consume(s0);
  }
  // Every weight is read: the next kernel may launch and wait for this one's stores.
  cuda::pdl_launch_dependents();
  partial[warp][g][2 * t] = c[0];
  partial[warp][g][2 * t + 1] = c[1];
  partial[warp][g + 8][2 * t] = c[2];
  partial[warp][g + 8][2 * t + 1] = c[3];
  __syncthreads();
  for (int i = threadIdx.x; i < kRowsPerWarp * 8; i += kSplit * 32) {
    const int r = i / 8, j = i % 8;
    const int64_t row = row0 + r;
    if (j >= p.m || row >= p.n) continue;
    float sum = p.bias != nullptr ? cuda::to_f32(static_cast<const bf16*>(p.bias)[row]) : 0.0f;
#pragma unroll
    for (int w = 0; w < kSplit; ++w) sum += partial[w][r][j];
    if constexpr (sizeof(Y) == 4) {
      static_cast<float*>(p.y)[j * p.n + row] = sum;
    } else {
      static_cast<bf16*>(p.y)[j * p.n + row] = cuda::to_bf16(sum);
    }
  }
}

// kSplit: enough warps for ~16 per SM (bytes in flight), at least 4 steps each.
template <typename Y>
void launch(const GemmParams& p, cudaStream_t stream) {
  const int64_t blocks = (p.n + kRowsPerWarp - 1) / kRowsPerWarp;
  const int64_t steps = (p.k / 8 + 3) / 4;
  const int64_t want = 16 * static_cast<int64_t>(cuda::num_sms());
  int split = 1;
  while (split < 8 && blocks * split < want && steps / (2 * split) >= 4) split *= 2;
  const auto grid = static_cast<unsigned>(blocks);
  auto go = [&](auto kernel, int warps) {
    cuda::launch_pdl(kernel, grid, warps * 32, 0, stream, p);
  };
  switch (split) {
    case 1:
      go(gemv_kernel<1, Y>, 1);
      break;
    case 2:
      go(gemv_kernel<2, Y>, 2);
      break;
    case 4:
      go(gemv_kernel<4, Y>, 4);
      break;
    default:
      go(gemv_kernel<8, Y>, 8);
      break;
  }
}

}  // namespace

bool gemv_cuda_supported(const GemmParams& p) {
  return p.dtype == DType::kBF16 && (p.y_dtype == DType::kBF16 || p.y_dtype == DType::kF32) &&
         p.m >= 1 && p.m <= kGemvMaxRows && p.k % 8 == 0 && cuda::aligned(p.x, 16) &&
         cuda::aligned(p.w, 16) && p.n / kRowsPerWarp < cuda::kMaxGridX;
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
