// swiglu on CUDA (bf16 in/out, fp32 math):
//   out[r, i] = bf16(silu(gate_up[r, i]) * gate_up[r, inter + i]),  silu(g) = g / (1 + exp(-g))
//
// A flat grid over rows x columns, 8 columns per thread with 16-byte loads and stores when the
// row length and the pointers allow (else one column per thread). A decode step of batch 1 has a
// single row of 14336 columns: spread over ~7 blocks it takes one load latency, where one block
// per row would walk it in 56 dependent rounds.
//
// With q_values set (the FP8 down projection reads the output) one block owns each row: it
// computes the row (bf16), takes the block max of those values and writes their e4m3 bytes and
// the row's scale, as quantize_fp8 would (ops/fp8_rows.cuh); rows of up to 32,768 columns hold
// their values in registers between the passes and store out only when the caller reads it
// (skip_out unset).
#include "ops/cuda_common.cuh"
#include "ops/fp8_rows.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

using cuda::bf16;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 132 * 16;  // a few waves; the loop covers the rest

__device__ __forceinline__ float silu_mul(float g, float u) {
  return g / (1.0f + expf(-g)) * u;
}

template <int kWidth>  // columns per thread: 8 (uint4) or 1
__global__ void __launch_bounds__(kThreads) swiglu_kernel(SwigluParams p) {
  cuda::pdl_launch_dependents();  // see ops_cuda.cuh: launched with PDL
  cuda::pdl_wait();
  const int64_t per_row = p.inter / kWidth;
  const int64_t total = p.rows * per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < total;
       v += stride) {
    const int64_t row = v / per_row, col = (v % per_row) * kWidth;
    const bf16* gate = static_cast<const bf16*>(p.gate_up) + row * 2 * p.inter + col;
    const bf16* up = gate + p.inter;
    bf16* out = static_cast<bf16*>(p.out) + row * p.inter + col;
    if constexpr (kWidth == 8) {
      const uint4 gv = *reinterpret_cast<const uint4*>(gate);
      const uint4 uv = *reinterpret_cast<const uint4*>(up);
      const auto* g2 = reinterpret_cast<const __nv_bfloat162*>(&gv);
      const auto* u2 = reinterpret_cast<const __nv_bfloat162*>(&uv);
      uint4 ov;
      auto* o2 = reinterpret_cast<__nv_bfloat162*>(&ov);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 g = __bfloat1622float2(g2[i]), u = __bfloat1622float2(u2[i]);
        o2[i] = __halves2bfloat162(cuda::to_bf16(silu_mul(g.x, u.x)),
                                   cuda::to_bf16(silu_mul(g.y, u.y)));
      }
      *reinterpret_cast<uint4*>(out) = ov;
    } else {
      *out = cuda::to_bf16(silu_mul(cuda::to_f32(*gate), cuda::to_f32(*up)));
    }
  }
}

// One row per block, quantized as well (see the top), any row: each thread stores its columns
// to out and re-reads them for the e4m3 pass.
__global__ void __launch_bounds__(kThreads) swiglu_quantize_kernel(SwigluParams p) {
  cuda::pdl_launch_dependents();
  cuda::pdl_wait();
  const int64_t row = blockIdx.x;
  const bf16* gate = static_cast<const bf16*>(p.gate_up) + row * 2 * p.inter;
  const bf16* up = gate + p.inter;
  bf16* out = static_cast<bf16*>(p.out) + row * p.inter;
  float amax = 0.0f;
  for (int64_t c = threadIdx.x; c < p.inter; c += kThreads) {
    const bf16 y = cuda::to_bf16(silu_mul(cuda::to_f32(gate[c]), cuda::to_f32(up[c])));
    out[c] = y;
    amax = fmaxf(amax, fabsf(cuda::to_f32(y)));
  }
  const float scale = cuda::e4m3_row_scale(cuda::block_max(amax));
  const float inv = 1.0f / scale;
  uint8_t* q = p.q_values + row * p.inter;
  for (int64_t c = threadIdx.x; c < p.inter; c += kThreads) {
    q[c] = cuda::to_e4m3(cuda::to_f32(out[c]) * inv);
  }
  if (threadIdx.x == 0) p.q_scales[row] = scale;
}

// The same for rows of up to cuda::kMaxRowColumns (inter % 8 == 0, 16-byte aligned), held in
// registers (ops/fp8_rows.cuh, row_threads) between the passes, so that out is stored only when
// the caller reads it (H100, 14,336 columns, 8,192 rows: 238 us, 339 with 256 threads of up to
// 16 chunks; dev/cuda/elementwise/lab.cu).
__global__ void __launch_bounds__(cuda::kMaxRowThreads) swiglu_quantize_vec_kernel(SwigluParams p) {
  cuda::pdl_launch_dependents();
  cuda::pdl_wait();
  const int64_t row = blockIdx.x;
  const int chunks = static_cast<int>(p.inter / 8), threads = static_cast<int>(blockDim.x);
  const auto* gate =
      reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.gate_up) + row * 2 * p.inter);
  const uint4* up = gate + chunks;
  // The first pass stores nothing, so that the compiler may issue every load of the row at once.
  uint4 y[cuda::kRowChunks];
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < cuda::kRowChunks; ++j) {
    const int c = static_cast<int>(threadIdx.x) + j * threads;
    if (c >= chunks) continue;
    const uint4 gv = gate[c], uv = up[c];
    const auto* g2 = reinterpret_cast<const __nv_bfloat162*>(&gv);
    const auto* u2 = reinterpret_cast<const __nv_bfloat162*>(&uv);
    auto* y2 = reinterpret_cast<__nv_bfloat162*>(&y[j]);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 g = __bfloat1622float2(g2[i]), u = __bfloat1622float2(u2[i]);
      y2[i] =
          __halves2bfloat162(cuda::to_bf16(silu_mul(g.x, u.x)), cuda::to_bf16(silu_mul(g.y, u.y)));
      const float2 stored = __bfloat1622float2(y2[i]);
      amax = fmaxf(amax, fmaxf(fabsf(stored.x), fabsf(stored.y)));
    }
  }
  const float scale = cuda::e4m3_row_scale(cuda::block_max(amax));
  const float inv = 1.0f / scale;
  auto* out = reinterpret_cast<uint4*>(static_cast<bf16*>(p.out) + row * p.inter);
  auto* q = reinterpret_cast<uint2*>(p.q_values + row * p.inter);
#pragma unroll
  for (int j = 0; j < cuda::kRowChunks; ++j) {
    const int c = static_cast<int>(threadIdx.x) + j * threads;
    if (c >= chunks) continue;
    if (!p.skip_out) out[c] = y[j];
    float v[8];
    cuda::unpack8(y[j], v);
    q[c] = cuda::to_e4m3x8(v, inv);
  }
  if (threadIdx.x == 0) p.q_scales[row] = scale;
}

}  // namespace

void swiglu_cuda(const SwigluParams& p, cudaStream_t stream) {
  INFLIGHT_CHECK_CODE(p.dtype == DType::kBF16, ErrorCode::kUnsupported,
                      "swiglu_cuda: bf16 only, got {}", dtype_name(p.dtype));
  if (p.rows == 0 || p.inter == 0) return;
  const bool vec = p.inter % 8 == 0 && cuda::aligned(p.gate_up, 16) && cuda::aligned(p.out, 16);
  if (p.q_values != nullptr) {
    INFLIGHT_CHECK(p.rows <= cuda::kMaxGridX, "swiglu_cuda: {} rows exceed the grid", p.rows);
    const auto rows = static_cast<unsigned>(p.rows);
    if (vec && cuda::aligned(p.q_values, 8) && p.inter <= cuda::kMaxRowColumns) {
      cuda::launch_pdl(swiglu_quantize_vec_kernel, rows, cuda::row_threads(p.inter), 0, stream, p);
    } else {
      cuda::launch_pdl(swiglu_quantize_kernel, rows, kThreads, 0, stream, p);
    }
    INFLIGHT_CUDA_CHECK_LAUNCH();
    return;
  }
  const int64_t items = p.rows * (vec ? p.inter / 8 : p.inter);
  const auto blocks =
      static_cast<unsigned>(std::min(kMaxBlocks, (items + kThreads - 1) / kThreads));
  if (vec) {
    cuda::launch_pdl(swiglu_kernel<8>, blocks, kThreads, 0, stream, p);
  } else {
    cuda::launch_pdl(swiglu_kernel<1>, blocks, kThreads, 0, stream, p);
  }
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
