// gemm for a few rows (decode at small batch): y[m, n] = x[m, k] w[n, k]^T (+ bias), m <= 8,
// bf16 operands, fp32 accumulation, y bf16 or f32. Reading w is the whole cost (a batch-1 step
// of an 8B model reads 15 GB of weights and does almost no arithmetic), so the kernels stream:
// one warp per row of w, 16-byte loads (8 weights per lane), several loads in flight per lane,
// weights loaded with the streaming cache hint; each lane's partial dot products are reduced
// with shuffles. Two shapes of the same loop:
//   m = 1, k <= kWaveMaxK: one wave of 512-thread blocks (as many as fit on every SM), each
//     warp walking rows row, row + grid warps, ...; x staged in shared memory once per block;
//     8 loads in flight per lane. No block waits for a second wave to start, and x costs one
//     global read per block instead of an L1 lookup per warp.
//   otherwise: a block of 8 warps per 8 rows, x (a few KB, re-read by every warp) from L1,
//     4 loads in flight per lane.
// Both are launched with PDL (ops_cuda.cuh): the first weight loads of every lane go out before
// the wait for the kernel that writes x; the next kernel may launch once every weight of the
// block is read (row per warp) or at once (one wave). Within a row the sums run in the same order in both, so m = 1 gives the
// same bits either way.
//
// The backend picks these kernels or cuBLASLt per shape by timing both once (CublasLtGemm).
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

// The row-per-8-warps kernel (any m <= 8, any k).
constexpr int kWarpsPerBlock = 8;
constexpr int kUnroll = 4;
// The one-wave kernel (m = 1): blocks of 16 warps, x (k bf16) in at most 32 KB of shared memory.
constexpr int kWaveWarps = 16;
constexpr int kWaveUnroll = 8;
constexpr int64_t kWaveMaxK = 16384;

__device__ __forceinline__ void unpack(const uint4& v, float (&out)[8]) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// One lane's share of a row's dot products with the M rows of x: 16-byte chunks lane, lane + 32,
// ... of the row (`chunks` of them), kU loads in flight. start() zeroes the sums and issues the
// row's first kU loads; finish() does the rest, reading chunk c of x row r through
// x_chunk(r * chunks + c).
template <int M, int kU>
struct RowStream {
  int64_t chunks;
  int lane;
  const uint4* w = nullptr;
  uint4 wv[kU];
  float acc[M];

  __device__ __forceinline__ void load(int64_t base) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t c = base + 32 * u;
      wv[u] = c < chunks ? __ldcs(w + c) : make_uint4(0, 0, 0, 0);
    }
  }
  template <typename XChunk>
  __device__ __forceinline__ void consume(int64_t base, XChunk x_chunk) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t c = base + 32 * u;
      if (c >= chunks) break;
      float wf[8];
      unpack(wv[u], wf);
#pragma unroll
      for (int r = 0; r < M; ++r) {
        float xf[8];
        unpack(x_chunk(r * chunks + c), xf);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[r] = fmaf(wf[i], xf[i], acc[r]);
      }
    }
  }
  __device__ __forceinline__ void start(const uint4* row) {
    w = row;
#pragma unroll
    for (int r = 0; r < M; ++r) acc[r] = 0.0f;
    load(lane);
  }
  template <typename XChunk>
  __device__ __forceinline__ void finish(XChunk x_chunk) {
    consume(lane, x_chunk);
    for (int64_t base = lane + 32 * kU; base < chunks; base += 32 * kU) {
      load(base);
      consume(base, x_chunk);
    }
  }
};

// Lane 0 of a warp stores the warp's sums of row `row` (+ bias).
template <int M, typename Y>
__device__ __forceinline__ void store_row(const GemmParams& p, int64_t row, int lane,
                                          float (&acc)[M]) {
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = cuda::warp_sum(acc[r]);
  if (lane != 0) return;
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

template <int M, typename Y>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gemv_kernel(GemmParams p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  const int64_t chunks = p.k / 8;  // 16-byte chunks per row
  const auto* x = reinterpret_cast<const uint4*>(p.x);
  const auto* w = static_cast<const bf16*>(p.w);
  RowStream<M, kUnroll> s{chunks, lane};
  // The first weights are in flight while the kernel before (the producer of x) finishes.
  s.start(reinterpret_cast<const uint4*>(w + min(row, p.n - 1) * p.k));
  cuda::pdl_wait();
  s.finish([&](int64_t i) { return __ldg(x + i); });
  // Every weight is read: the next kernel may launch and wait for this one's stores.
  cuda::pdl_launch_dependents();
  if (row >= p.n) return;  // the whole warp leaves together
  store_row<M, Y>(p, row, lane, s.acc);
}

// m = 1, one wave: warp `warp` of block b takes rows b * kWaveWarps + warp + i * (grid warps).
// Dynamic shared memory: x, k bf16.
template <typename Y>
__global__ void __launch_bounds__(kWaveWarps * 32, 2) gemv_wave_kernel(GemmParams p) {
  extern __shared__ uint4 xs[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t chunks = p.k / 8;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kWaveWarps + warp;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kWaveWarps;
  const auto* w = static_cast<const bf16*>(p.w);
  auto row_ptr = [&](int64_t row) { return reinterpret_cast<const uint4*>(w + row * p.k); };
  RowStream<1, kWaveUnroll> s{chunks, lane};
  s.start(row_ptr(min(first, p.n - 1)));  // in flight across the wait, as above
  cuda::pdl_wait();
  // The next kernel may launch now that the one before has completed (not earlier: the small
  // kernels let their dependents launch at once, so a GEMV that did the same would let the
  // whole step's kernels launch and hold SM slots ahead of their turn). Its blocks take this
  // one's place as each block ends, and its first weight loads overlap this kernel's last rows.
  cuda::pdl_launch_dependents();
  const auto* x = static_cast<const uint4*>(p.x);
  for (int64_t i = threadIdx.x; i < chunks; i += kWaveWarps * 32) xs[i] = x[i];
  __syncthreads();
  bool preloaded = true;
  for (int64_t row = first; row < p.n; row += stride) {
    s.w = row_ptr(row);
    s.acc[0] = 0.0f;
    for (int64_t base = lane; base < chunks; base += 32 * kWaveUnroll) {
      if (!preloaded) s.load(base);
      preloaded = false;
      s.consume(base, [&](int64_t i) { return xs[i]; });
    }
    store_row<1, Y>(p, row, lane, s.acc);
  }
}

// Blocks of gemv_wave_kernel<Y> that fit on one SM beside each other.
template <typename Y>
int wave_blocks_per_sm() {
  static const int fit = [] {
    int blocks = 0;
    INFLIGHT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks, gemv_wave_kernel<Y>, kWaveWarps * 32, kWaveMaxK * sizeof(bf16)));
    return std::max(blocks, 1);
  }();
  return fit;
}

template <typename Y>
void launch(const GemmParams& p, cudaStream_t stream) {
  if (p.m == 1 && p.k <= kWaveMaxK) {
    // Rows spread evenly over one wave of warps; no more blocks than that needs.
    const int64_t warps = int64_t{wave_blocks_per_sm<Y>()} * cuda::num_sms() * kWaveWarps;
    const int64_t rows_per_warp = (p.n + warps - 1) / warps;
    const int64_t rows_per_block = rows_per_warp * kWaveWarps;
    const auto blocks = static_cast<unsigned>((p.n + rows_per_block - 1) / rows_per_block);
    cuda::launch_pdl(gemv_wave_kernel<Y>, blocks, kWaveWarps * 32, p.k * sizeof(bf16), stream, p);
    return;
  }
  const auto blocks = static_cast<unsigned>((p.n + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const int threads = kWarpsPerBlock * 32;
  auto go = [&](auto kernel) { cuda::launch_pdl(kernel, blocks, threads, 0, stream, p); };
  switch (p.m) {
    case 1:
      go(gemv_kernel<1, Y>);
      break;
    case 2:
      go(gemv_kernel<2, Y>);
      break;
    case 3:
      go(gemv_kernel<3, Y>);
      break;
    case 4:
      go(gemv_kernel<4, Y>);
      break;
    case 5:
      go(gemv_kernel<5, Y>);
      break;
    case 6:
      go(gemv_kernel<6, Y>);
      break;
    case 7:
      go(gemv_kernel<7, Y>);
      break;
    default:
      go(gemv_kernel<8, Y>);
      break;
  }
}

}  // namespace

bool gemv_cuda_supported(const GemmParams& p) {
  return p.dtype == DType::kBF16 && (p.y_dtype == DType::kBF16 || p.y_dtype == DType::kF32) &&
         p.m >= 1 && p.m <= kGemvMaxRows && p.k % 8 == 0 && cuda::aligned(p.x, 16) &&
         cuda::aligned(p.w, 16) && p.n / kWarpsPerBlock < cuda::kMaxGridX;
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
