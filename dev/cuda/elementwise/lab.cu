// Element-wise lab: the fused SwiGLU + e4m3 row quantization (ops/swiglu_cuda.cu), RMSNorm +
// residual add + e4m3 quantization (ops/rms_norm_cuda.cu) and the per-token quantization of the
// attention output (ops/quantize_fp8_cuda.cu) of the FP8 layers, one block per row,
// with threads per row and chunks per thread as knobs, beside the engine's own kernels (called
// through ops_cuda.cuh, bf16 output skipped as the model does). Each is timed back to back over
// buffer sets rotated past L2 and its e4m3 bytes checked against the engine's. Prints us per
// call and the share of the copy bandwidth its bytes take.
//
// Built against a build directory's ops library (dev/cuda/device_lib.sh build_lab):
//   build_lab DIR dev/cuda/elementwise/lab.cu elementwise_lab build && DIR/bin/elementwise_lab
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ops/cuda_common.cuh"
#include "ops/fp8_rows.cuh"
#include "ops/ops_cuda.cuh"
#include "ops/quantize_fp8.h"
#include "ops/rms_norm.h"
#include "ops/swiglu.h"

#define CHECK(x)                                                            \
  do {                                                                      \
    cudaError_t e = (x);                                                    \
    if (e != cudaSuccess) {                                                 \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                         \
    }                                                                       \
  } while (0)

using namespace inflight;
using cuda::bf16;

namespace {

__device__ __forceinline__ float silu_mul(float g, float u) {
  return g / (1.0f + expf(-g)) * u;
}

// 8 values times inv as 8 e4m3 bytes, converted one by one (the engine's cuda::to_e4m3x8
// converts pairs: the "pairs" variants).
__device__ __forceinline__ uint2 e4m3x8_singles(const float (&v)[8], float inv) {
  uint32_t w[2] = {0, 0};
#pragma unroll
  for (int i = 0; i < 8; ++i)
    w[i / 4] |= static_cast<uint32_t>(cuda::to_e4m3(v[i] * inv)) << (8 * (i % 4));
  return make_uint2(w[0], w[1]);
}

// SwiGLU + quantize: gate_up [rows, 2 I] -> q [rows, I] e4m3, scales [rows].
template <int kThreads, int kChunks, bool kPairs>
__global__ void __launch_bounds__(kThreads)
    swiglu_q(const bf16* gate_up, int64_t inter, uint8_t* qv, float* qs) {
  const int64_t row = blockIdx.x, chunks = inter / 8;
  const auto* gate = reinterpret_cast<const uint4*>(gate_up + row * 2 * inter);
  const uint4* up = gate + chunks;
  uint4 y[kChunks];
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int64_t c = threadIdx.x + j * kThreads;
    if (c >= chunks) continue;
    const uint4 gv = gate[c], uv = up[c];
    const auto* g2 = reinterpret_cast<const __nv_bfloat162*>(&gv);
    const auto* u2 = reinterpret_cast<const __nv_bfloat162*>(&uv);
    auto* y2 = reinterpret_cast<__nv_bfloat162*>(&y[j]);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 g = __bfloat1622float2(g2[i]), u = __bfloat1622float2(u2[i]);
      y2[i] = __halves2bfloat162(__float2bfloat16(silu_mul(g.x, u.x)),
                                 __float2bfloat16(silu_mul(g.y, u.y)));
      const float2 s = __bfloat1622float2(y2[i]);
      amax = fmaxf(amax, fmaxf(fabsf(s.x), fabsf(s.y)));
    }
  }
  const float scale = cuda::e4m3_row_scale(cuda::block_max(amax));
  const float inv = 1.0f / scale;
  auto* q = reinterpret_cast<uint2*>(qv + row * inter);
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int64_t c = threadIdx.x + j * kThreads;
    if (c >= chunks) continue;
    float v[8];
    cuda::unpack8(y[j], v);
    q[c] = kPairs ? cuda::to_e4m3x8(v, inv) : e4m3x8_singles(v, inv);
  }
  if (threadIdx.x == 0) qs[row] = scale;
}

// RMSNorm with the residual add: residual += add; q = e4m3(rmsnorm(residual) * w), [rows, dim].
// Every load of the row first (as ops/norm_rows.cuh); kWeightsFirst: the weight's chunks too,
// before the first block reduction, instead of after it (one memory round trip less on the
// chain of a block, what bounds a grid of one wave such as 1,024 rows).
template <int kThreads, int kChunks, bool kPairs, bool kWeightsFirst = false>
__global__ void __launch_bounds__(kThreads)
    rms_q(bf16* residual, const bf16* add, const bf16* w, int64_t dim, uint8_t* qv, float* qs) {
  const int64_t row = blockIdx.x, chunks = dim / 8;
  auto* res = reinterpret_cast<uint4*>(residual + row * dim);
  const auto* ad = reinterpret_cast<const uint4*>(add + row * dim);
  const auto* wv = reinterpret_cast<const uint4*>(w);
  uint4 loaded[kChunks], added[kChunks], weights[kChunks];
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int64_t c = threadIdx.x + j * kThreads;
    if (c >= chunks) continue;
    loaded[j] = res[c];
    added[j] = ad[c];
    if constexpr (kWeightsFirst) weights[j] = wv[c];
  }
  float x[kChunks][8];
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int64_t c = threadIdx.x + j * kThreads;
    if (c >= chunks) continue;
    float a[8];
    cuda::unpack8(loaded[j], x[j]);
    cuda::unpack8(added[j], a);
    uint4 s;
    auto* s2 = reinterpret_cast<__nv_bfloat162*>(&s);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s2[i] = __halves2bfloat162(__float2bfloat16(x[j][2 * i] + a[2 * i]),
                                 __float2bfloat16(x[j][2 * i + 1] + a[2 * i + 1]));
    }
    res[c] = s;
    cuda::unpack8(s, x[j]);
#pragma unroll
    for (int i = 0; i < 8; ++i) sum_sq += x[j][i] * x[j][i];
  }
  const float inv_rms = rsqrtf(cuda::block_sum(sum_sq) / dim + 1e-5f);
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int64_t c = threadIdx.x + j * kThreads;
    if (c >= chunks) continue;
    float wf[8];
    cuda::unpack8(kWeightsFirst ? weights[j] : wv[c], wf);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      x[j][i] = __bfloat162float(__float2bfloat16(x[j][i] * inv_rms * wf[i]));
      amax = fmaxf(amax, fabsf(x[j][i]));
    }
  }
  const float scale = cuda::e4m3_row_scale(cuda::block_max(amax));
  const float inv = 1.0f / scale;
  auto* q = reinterpret_cast<uint2*>(qv + row * dim);
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int64_t c = threadIdx.x + j * kThreads;
    if (c < chunks) q[c] = kPairs ? cuda::to_e4m3x8(x[j], inv) : e4m3x8_singles(x[j], inv);
  }
  if (threadIdx.x == 0) qs[row] = scale;
}

// The per-token quantization as one block of 256 threads walking the row twice, element by
// element (the engine's kernel before rows were held in registers).
__global__ void __launch_bounds__(256)
    quantize_scalar(const bf16* x, int64_t k, uint8_t* qv, float* qs) {
  const int64_t r = blockIdx.x;
  x += r * k;
  float amax = 0.0f;
  for (int64_t c = threadIdx.x; c < k; c += 256) amax = fmaxf(amax, fabsf(__bfloat162float(x[c])));
  const float scale = cuda::e4m3_row_scale(cuda::block_max(amax));
  const float inv = 1.0f / scale;
  for (int64_t c = threadIdx.x; c < k; c += 256) {
    qv[r * k + c] = cuda::to_e4m3(__bfloat162float(x[c]) * inv);
  }
  if (threadIdx.x == 0) qs[r] = scale;
}

__global__ void fill(bf16* p, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2bfloat16(scale * ((h & 0xffffff) / 8388608.0f - 1.0f));
  }
}

float copy_bandwidth_gbs() {
  const size_t bytes = size_t{1} << 30;
  void *a, *b;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  cudaEventRecord(e0);
  for (int i = 0; i < 5; ++i) CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaFree(a);
  cudaFree(b);
  return 2.0f * bytes * 5 / (ms * 1e-3f) / 1e9f;
}

struct Result {
  float us;
  bool same;
};

// Times launch(set) over `sets` buffer sets, after one checked call on set 0.
template <class Launch>
Result time_it(Launch launch, int sets, const std::vector<uint8_t>& ref, const uint8_t* q,
               size_t q_bytes, bool* have_ref, std::vector<uint8_t>* out_ref) {
  launch(0);
  CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> got(q_bytes);
  CHECK(cudaMemcpy(got.data(), q, q_bytes, cudaMemcpyDeviceToHost));
  bool same = true;
  if (!*have_ref) {
    *out_ref = got;
    *have_ref = true;
  } else {
    same = std::memcmp(ref.data(), got.data(), q_bytes) == 0;
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const int reps = 40;
  cudaEventRecord(e0);
  for (int r = 0; r < reps; ++r) launch(r % sets);
  cudaEventRecord(e1);
  CHECK(cudaEventSynchronize(e1));
  float ms;
  cudaEventElapsedTime(&ms, e0, e1);
  return {ms * 1e3f / reps, same};
}

}  // namespace

int main() {
  const float bw = copy_bandwidth_gbs();
  std::printf("copy bandwidth %.0f GB/s\n", bw);
  const int64_t inter = 14336, dim = 4096;
  for (int64_t rows : {256, 1024, 8192}) {
    // SwiGLU: sets rotated past L2 (each set >= 60 MB or 4 sets).
    const int sets = rows >= 8192 ? 2 : 6;
    const size_t in_elems = rows * 2 * inter, q_bytes = rows * inter;
    std::vector<bf16*> in(sets);
    for (auto& p : in) {
      CHECK(cudaMalloc(&p, in_elems * 2));
      fill<<<1024, 256>>>(p, in_elems, 7, 4.0f);  // every set the same values
    }
    uint8_t* q;
    float* qs;
    CHECK(cudaMalloc(&q, q_bytes * sets));
    CHECK(cudaMalloc(&qs, rows * 4 * sets));
    const double bytes = in_elems * 2.0 + q_bytes + rows * 4.0;
    std::vector<uint8_t> ref;
    bool have = false;
    auto run = [&](const char* name, auto kernel, int threads) {
      auto launch = [&](int s) {
        kernel<<<rows, threads>>>(in[s], inter, q + s * q_bytes, qs + s * rows);
      };
      const Result r = time_it(launch, sets, ref, q, q_bytes, &have, &ref);
      std::printf("swiglu rows %5ld %-22s %8.1f us  %5.1f%% of copy bw  %s\n", rows, name, r.us,
                  100.0 * bytes / (r.us * 1e-6) / 1e9 / bw, r.same ? "same" : "DIFFERENT");
    };
    bf16* scratch;  // the engine kernel's bf16 output, unwritten with skip_out
    CHECK(cudaMalloc(&scratch, q_bytes * 2));
    {
      auto launch = [&](int s) {
        SwigluParams p;
        p.gate_up = in[s];
        p.out = scratch;
        p.rows = rows;
        p.inter = inter;
        p.dtype = DType::kBF16;
        p.q_values = q + s * q_bytes;
        p.q_scales = qs + s * rows;
        p.skip_out = true;
        swiglu_cuda(p, nullptr);
      };
      const Result r = time_it(launch, sets, ref, q, q_bytes, &have, &ref);
      std::printf("swiglu rows %5ld %-22s %8.1f us  %5.1f%% of copy bw\n", rows, "engine", r.us,
                  100.0 * bytes / (r.us * 1e-6) / 1e9 / bw);
    }
    cudaFree(scratch);
    run("256 x 16", swiglu_q<256, 16, false>, 256);
    run("256 x 8", swiglu_q<256, 8, false>, 256);
    run("256 x 8 pairs", swiglu_q<256, 8, true>, 256);
    run("512 x 4", swiglu_q<512, 4, false>, 512);
    run("512 x 4 pairs", swiglu_q<512, 4, true>, 512);
    run("1024 x 2", swiglu_q<1024, 2, false>, 1024);
    run("1024 x 2 pairs", swiglu_q<1024, 2, true>, 1024);
    run("128 x 16", swiglu_q<128, 16, false>, 128);
    for (auto p : in) cudaFree(p);
    cudaFree(q);
    cudaFree(qs);
  }
  for (int64_t rows : {1024, 8192}) {
    const int sets = rows >= 8192 ? 2 : 8;
    const size_t elems = rows * dim, q_bytes = rows * dim;
    std::vector<bf16*> res(sets), add(sets);
    for (int s = 0; s < sets; ++s) {
      CHECK(cudaMalloc(&res[s], elems * 2));
      CHECK(cudaMalloc(&add[s], elems * 2));
    }
    bf16* w;
    CHECK(cudaMalloc(&w, dim * 2));
    fill<<<16, 256>>>(w, dim, 3, 1.0f);
    uint8_t* q;
    float* qs;
    CHECK(cudaMalloc(&q, q_bytes * sets));
    CHECK(cudaMalloc(&qs, rows * 4 * sets));
    const double bytes = elems * 2.0 * 3 + q_bytes + rows * 4.0;
    std::vector<uint8_t> ref;
    bool have = false;
    auto run = [&](const char* name, auto kernel, int threads) {
      auto launch = [&](int s) {
        kernel<<<rows, threads>>>(res[s], add[s], w, dim, q + s * q_bytes, qs + s * rows);
      };
      // The residual grows every call: refill before the checked call.
      for (int s = 0; s < sets; ++s) {
        fill<<<1024, 256>>>(res[s], elems, 5, 2.0f);
        fill<<<1024, 256>>>(add[s], elems, 9, 1.0f);
      }
      const Result r = time_it(launch, sets, ref, q, q_bytes, &have, &ref);
      std::printf("rmsnorm rows %5ld %-21s %8.1f us  %5.1f%% of copy bw  %s\n", rows, name, r.us,
                  100.0 * bytes / (r.us * 1e-6) / 1e9 / bw, r.same ? "same" : "DIFFERENT");
    };
    {
      bf16* scratch;
      CHECK(cudaMalloc(&scratch, elems * 2));
      auto launch = [&](int s) {
        RmsNormParams p;
        p.add = add[s];
        p.residual = res[s];
        p.weight = w;
        p.out = scratch;
        p.rows = rows;
        p.dim = dim;
        p.eps = 1e-5f;
        p.dtype = DType::kBF16;
        p.q_values = q + s * q_bytes;
        p.q_scales = qs + s * rows;
        p.skip_out = true;
        rms_norm_cuda(p, nullptr);
      };
      for (int s = 0; s < sets; ++s) {
        fill<<<1024, 256>>>(res[s], elems, 5, 2.0f);
        fill<<<1024, 256>>>(add[s], elems, 9, 1.0f);
      }
      const Result r = time_it(launch, sets, ref, q, q_bytes, &have, &ref);
      std::printf("rmsnorm rows %5ld %-21s %8.1f us  %5.1f%% of copy bw\n", rows, "engine", r.us,
                  100.0 * bytes / (r.us * 1e-6) / 1e9 / bw);
      cudaFree(scratch);
    }
    run("256 x 4", rms_q<256, 4, false>, 256);
    run("256 x 2", rms_q<256, 2, false>, 256);
    run("256 x 2 pairs", rms_q<256, 2, true>, 256);
    run("128 x 4", rms_q<128, 4, false>, 128);
    run("128 x 4 pairs", rms_q<128, 4, true>, 128);
    run("512 x 1 pairs", rms_q<512, 1, true>, 512);
    run("256 x 2 pairs w first", rms_q<256, 2, true, true>, 256);
    run("128 x 4 pairs w first", rms_q<128, 4, true, true>, 128);
    run("512 x 1 pairs w first", rms_q<512, 1, true, true>, 512);
    for (int s = 0; s < sets; ++s) {
      cudaFree(res[s]);
      cudaFree(add[s]);
    }
    cudaFree(w);
    cudaFree(q);
    cudaFree(qs);
  }
  for (int64_t rows : {1024, 8192}) {
    const int sets = rows >= 8192 ? 2 : 8;
    const size_t elems = rows * dim, q_bytes = rows * dim;
    std::vector<bf16*> x(sets);
    for (auto& p : x) {
      CHECK(cudaMalloc(&p, elems * 2));
      fill<<<1024, 256>>>(p, elems, 11, 3.0f);
    }
    uint8_t* q;
    float* qs;
    CHECK(cudaMalloc(&q, q_bytes * sets));
    CHECK(cudaMalloc(&qs, rows * 4 * sets));
    const double bytes = elems * 2.0 + q_bytes + rows * 4.0;
    std::vector<uint8_t> ref;
    bool have = false;
    auto report = [&](const char* name, const Result& r) {
      std::printf("quantize rows %5ld %-20s %8.1f us  %5.1f%% of copy bw  %s\n", rows, name, r.us,
                  100.0 * bytes / (r.us * 1e-6) / 1e9 / bw, r.same ? "same" : "DIFFERENT");
    };
    report("engine", time_it(
                         [&](int s) {
                           QuantizeFp8Params p;
                           p.x = x[s];
                           p.values = q + s * q_bytes;
                           p.scales = qs + s * rows;
                           p.m = rows;
                           p.k = dim;
                           p.dtype = DType::kBF16;
                           quantize_fp8_cuda(p, nullptr);
                         },
                         sets, ref, q, q_bytes, &have, &ref));
    report("256 scalar", time_it(
                             [&](int s) {
                               quantize_scalar<<<rows, 256>>>(x[s], dim, q + s * q_bytes,
                                                              qs + s * rows);
                             },
                             sets, ref, q, q_bytes, &have, &ref));
    for (auto p : x) cudaFree(p);
    cudaFree(q);
    cudaFree(qs);
  }
  return 0;
}
