// Decode GEMV lab: the Llama-3.1-8B projections at m = 1..8 on one GPU, timed with CUDA events.
//
//   v1      the one-warp-per-row GEMV of commit e3fad19 (x re-read from L1 by every warp,
//           one block of 8 warps per 8 rows, plain launches)
//   prod    ops/gemv_cuda.cu as built (today v1 itself: a check of the lab copy)
//   v1+pdl  v1 launched with programmatic dependent launch: each warp's first weight loads
//           issued before griddepcontrol.wait, dependents allowed at block start (run 4)
//   v3      a staged variant kept here for comparison: x in shared memory, a one-wave grid,
//           knobs for block size, loads in flight, blocks per SM, PDL and its trigger (best in
//           the graph below, lost in the engine: README attempt 10)
//   v4      weights streamed by TMA bulk copies into a ring of shared-memory slots (m = 1;
//           slower than v1: README attempt 9)
//
// Each per-launch figure is the median over 7 repeats of 20 back-to-back launches (weights
// rotated over enough copies that L2 holds none of them), as GB/s of weights and as a fraction
// of the copy bandwidth measured here. Then one graph of 32 layers x [rms_norm, qkv, RoPE and
// attention stand-ins, o, rms_norm, gate_up, swiglu, down] per GEMV version, against the floor.
// The graph runs twice: stand-ins as plain launches, then launched under PDL with dependents at
// once, as the engine's RoPE and attention are. Neither predicts the engine for a GEMV whose
// cost depends on what else is resident (README, attempt 10): measure those in the engine.
// Build: dev/cuda/decode/build_lab.sh BUILD_DIR (links the ops library of BUILD_DIR).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

using namespace inflight;

#define CHECK(call)                                                                   \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,               \
                   cudaGetErrorString(e_));                                           \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace v1 {
constexpr int kWarpsPerBlock = 8, kUnroll = 4;
__device__ __forceinline__ void unpack(const uint4& v, float (&out)[8]) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v);
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}
template <int M, bool kPdl>
__global__ void __launch_bounds__(256) kernel(GemmParams p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (row >= p.n) return;
  const int64_t chunks = p.k / 8;
  const auto* w = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.w) + row * p.k);
  const auto* x = reinterpret_cast<const uint4*>(p.x);
  float acc[M] = {};
  uint4 wv[kUnroll];
  auto load = [&](int64_t base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = base + 32 * u;
      wv[u] = c < chunks ? __ldcs(w + c) : make_uint4(0, 0, 0, 0);
    }
  };
  if constexpr (kPdl) {
    load(lane);
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  for (int64_t base = lane; base < chunks; base += 32 * kUnroll) {
    if (!kPdl || base != lane) load(base);
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
  for (int r = 0; r < M; ++r) {
    float v = acc[r];
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    acc[r] = v;
  }
  if (lane == 0) {
    for (int r = 0; r < M; ++r) {
      if (p.y_dtype == DType::kF32) static_cast<float*>(p.y)[r * p.n + row] = acc[r];
      else static_cast<__nv_bfloat16*>(p.y)[r * p.n + row] = __float2bfloat16_rn(acc[r]);
    }
  }
}
template <bool kPdl>
void launch(void (*k)(GemmParams), const GemmParams& p, cudaStream_t s) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = kPdl ? 1 : 0;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>((p.n + 7) / 8));
  cfg.blockDim = dim3(256);
  cfg.stream = s;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CHECK(cudaLaunchKernelEx(&cfg, k, p));
}
template <bool kPdl = false>
void run(const GemmParams& p, cudaStream_t s) {
  switch (p.m) {
    case 1: launch<kPdl>(kernel<1, kPdl>, p, s); break;
    case 2: launch<kPdl>(kernel<2, kPdl>, p, s); break;
    case 4: launch<kPdl>(kernel<4, kPdl>, p, s); break;
    default: launch<kPdl>(kernel<8, kPdl>, p, s); break;
  }
}
}  // namespace v1

// v3: the staged kernel of ops/gemv_cuda.cu with its knobs exposed (plain input only): block
// size and loads in flight (template), blocks per SM, PDL, preload before the wait, and where
// dependents are allowed (0: at the start, 1: at the last row, 2: never).
namespace v3 {
struct Knobs {
  int per_sm = 0;  // 0: as many as fit
  bool pdl = true, preload = true;
  int trigger = 1;
};
struct Args {
  GemmParams p;
  int64_t chunks;
  bool preload;
  int trigger;
};
template <int M, int kThreads, int kUnroll>
__global__ void __launch_bounds__(kThreads) kernel(Args a) {
  extern __shared__ uint4 xs[];
  constexpr int kWarps = kThreads / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n = a.p.n, chunks = a.chunks;
  const int64_t first_row = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int64_t row_stride = static_cast<int64_t>(gridDim.x) * kWarps;
  const auto* w = static_cast<const __nv_bfloat16*>(a.p.w);
  uint4 wv[kUnroll];
  auto load = [&](const uint4* wr, int64_t base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = base + 32 * u;
      wv[u] = c < chunks ? __ldcs(wr + c) : make_uint4(0, 0, 0, 0);
    }
  };
  if (a.preload && first_row < n) load(reinterpret_cast<const uint4*>(w + first_row * a.p.k), lane);
  if (a.trigger == 0) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const auto* x = static_cast<const uint4*>(a.p.x);
  for (int64_t i = threadIdx.x; i < M * chunks; i += kThreads) xs[i] = i < a.p.m * chunks ? x[i] : make_uint4(0, 0, 0, 0);
  __syncthreads();
  bool preloaded = a.preload;
  for (int64_t row = first_row; row < n; row += row_stride) {
    if (a.trigger == 1 && row + row_stride >= n) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    const auto* wr = reinterpret_cast<const uint4*>(w + row * a.p.k);
    float acc[M] = {};
    for (int64_t base = lane; base < chunks; base += 32 * kUnroll) {
      if (!preloaded) load(wr, base);
      preloaded = false;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = base + 32 * u;
        if (c >= chunks) break;
        float wf[8];
        v1::unpack(wv[u], wf);
#pragma unroll
        for (int r = 0; r < M; ++r) {
          float xf[8];
          v1::unpack(xs[r * chunks + c], xf);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[r] = fmaf(wf[i], xf[i], acc[r]);
        }
      }
    }
    for (int r = 0; r < M; ++r) {
      float v = acc[r];
      for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
      acc[r] = v;
    }
    if (lane == 0) {
      for (int r = 0; r < a.p.m && r < M; ++r) {
        if (a.p.y_dtype == DType::kF32) static_cast<float*>(a.p.y)[r * n + row] = acc[r];
        else static_cast<__nv_bfloat16*>(a.p.y)[r * n + row] = __float2bfloat16_rn(acc[r]);
      }
    }
  }
}
template <int kThreads, int kUnroll>
void run(const GemmParams& p, cudaStream_t s, const Knobs& kn) {
  auto* k = kernel<1, kThreads, kUnroll>;
  const size_t smem = p.k * 2;
  static int fit = 0;
  if (fit == 0) {
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, k, kThreads, 32 * 1024));
  }
  const int per_sm = kn.per_sm > 0 ? std::min(kn.per_sm, fit) : fit;
  constexpr int kWarps = kThreads / 32;
  const int64_t slots = int64_t{per_sm} * 132 * kWarps;
  const int64_t rows_per_warp = (p.n + slots - 1) / slots;
  const int64_t blocks = (p.n + rows_per_warp * kWarps - 1) / (rows_per_warp * kWarps);
  Args a{p, p.k / 8, kn.preload, kn.pdl ? kn.trigger : 2};
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = kn.pdl ? 1 : 0;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CHECK(cudaLaunchKernelEx(&cfg, k, a));
}
}  // namespace v3

// v4 (session 4): weights streamed by TMA. One block per SM: a producer warp copies the block's
// contiguous share of w, 32 KB at a time (R = 1-8 whole rows), with cp.async.bulk into a ring
// of kStages shared-memory slots, completing on an mbarrier per slot; 8 consumer warps take
// each slot's rows (8 / R warps per row, partial sums through shared memory), x (bf16) staged
// in shared memory once. The producer issues its first copies before griddepcontrol.wait (the
// weights do not depend on the kernel before) and lets the next kernel launch after its last
// copy, so up to kStages x 32 KB per SM is in flight across the kernel boundary. m = 1.
namespace v4 {
constexpr int kConsumers = 8, kThreads = (kConsumers + 1) * 32, kStages = 6;
constexpr int kSlotBytes = 32 * 1024;
constexpr int kSmemBytes = kStages * kSlotBytes + 28 * 1024 + 1024;  // slots, x (k <= 14336)

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = smem_u32(bar);
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  }
}

__global__ void __launch_bounds__(kThreads, 1) kernel(GemmParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t full[kStages], empty[kStages];
  __shared__ float partial[kStages][kConsumers];
  unsigned char* slots = smem;
  auto* xs = reinterpret_cast<__nv_bfloat16*>(smem + kStages * kSlotBytes);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t k = p.k, n = p.n, row_bytes = k * 2;
  int rows_per_slot = static_cast<int>(kSlotBytes / row_bytes);
  rows_per_slot = rows_per_slot >= 8 ? 8 : rows_per_slot >= 4 ? 4 : rows_per_slot >= 2 ? 2 : 1;
  const int warps_per_row = kConsumers / rows_per_slot;
  const int64_t total = (n + rows_per_slot - 1) / rows_per_slot;  // slots' worth of rows
  const int64_t first = total * blockIdx.x / gridDim.x, last = total * (blockIdx.x + 1) / gridDim.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(&empty[s])), "r"(kConsumers));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  if (warp == kConsumers) {
    if (lane == 0) {
      const auto* w = static_cast<const unsigned char*>(p.w);
      for (int64_t i = first; i < last; ++i) {
        const int64_t j = i - first;
        const int slot = static_cast<int>(j % kStages);
        if (j >= kStages) mbar_wait(&empty[slot], static_cast<uint32_t>((j / kStages - 1) & 1));
        const int64_t row0 = i * rows_per_slot;
        const int64_t rows = row0 + rows_per_slot <= n ? rows_per_slot : n - row0;
        const uint32_t bytes = static_cast<uint32_t>(rows * row_bytes);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(&full[slot])),
                     "r"(bytes)
                     : "memory");
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                smem_u32(slots + slot * kSlotBytes)),
            "l"(w + row0 * row_bytes), "r"(bytes), "r"(smem_u32(&full[slot]))
            : "memory");
      }
      asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    }
    asm volatile("griddepcontrol.wait;" ::: "memory");
    return;
  }
  // Consumers: x into shared memory once the kernel before has written it.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const auto* x = static_cast<const uint4*>(p.x);
  for (int64_t c = threadIdx.x; c < k / 8; c += kConsumers * 32) reinterpret_cast<uint4*>(xs)[c] = x[c];
  asm volatile("bar.sync 1, %0;" ::"r"(kConsumers * 32) : "memory");
  const int r_in_slot = warp / warps_per_row, part = warp % warps_per_row;
  const int64_t part_chunks = k / 8 / warps_per_row;  // 16-byte chunks of a row per warp
  for (int64_t i = first; i < last; ++i) {
    const int64_t j = i - first;
    const int slot = static_cast<int>(j % kStages);
    mbar_wait(&full[slot], static_cast<uint32_t>((j / kStages) & 1));
    const int64_t row = i * rows_per_slot + r_in_slot;
    float acc = 0.0f;
    if (row < n) {
      const auto* wr = reinterpret_cast<const uint4*>(slots + slot * kSlotBytes + r_in_slot * row_bytes) +
                       part * part_chunks;
      const auto* xr = reinterpret_cast<const uint4*>(xs) + part * part_chunks;
      for (int64_t c = lane; c < part_chunks; c += 32) {
        float wf[8], xf[8];
        v1::unpack(wr[c], wf);
        v1::unpack(xr[c], xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc = fmaf(wf[e], xf[e], acc);
      }
    }
    acc = cuda::warp_sum(acc);
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(&empty[slot])) : "memory");
    if (warps_per_row > 1) {
      if (lane == 0) partial[slot][warp] = acc;
      asm volatile("bar.sync 1, %0;" ::"r"(kConsumers * 32) : "memory");
      if (part == 0 && lane == 0) {
        acc = 0.0f;
        for (int q = 0; q < warps_per_row; ++q) acc += partial[slot][warp + q];
      }
    }
    if (part == 0 && lane == 0 && row < n) {
      if (p.y_dtype == DType::kF32) static_cast<float*>(p.y)[row] = acc;
      else static_cast<__nv_bfloat16*>(p.y)[row] = __float2bfloat16_rn(acc);
    }
  }
}

void run(const GemmParams& p, cudaStream_t s) {
  cuda::allow_dynamic_smem<kernel, kSmemBytes>();
  cuda::launch_pdl(kernel, cuda::num_sms(), kThreads, kSmemBytes, s, p);
}
}  // namespace v4


// Stand-ins for RoPE and attention at decode: `blocks` blocks that only wait `ns` nanoseconds.
// kPdl: launched with PDL and letting their dependents launch at once, as the engine's RoPE and
// attention kernels do.
template <bool kPdl>
__global__ void spin(long long ns) {
  if constexpr (kPdl) {
    cuda::pdl_launch_dependents();
    cuda::pdl_wait();
  }
  long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= ns) break;
    __nanosleep(200);
  }
}

__global__ void fill(__nv_bfloat16* p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = __float2bfloat16_rn(scale * (static_cast<float>(h & 0xffff) / 32768.0f - 1.0f));
  }
}

__nv_bfloat16* alloc_bf16(size_t n, uint32_t seed, float scale) {
  __nv_bfloat16* p = nullptr;
  CHECK(cudaMalloc(&p, n * 2));
  fill<<<1024, 256>>>(p, n, seed, scale);
  return p;
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median of 7 repeats of `reps` calls of f(i), microseconds per call.
float time_us(cudaStream_t s, int reps, const std::function<void(int)>& f) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < reps; ++i) f(i);  // warm-up
  std::vector<float> t;
  for (int r = 0; r < 7; ++r) {
    CHECK(cudaEventRecord(a, s));
    for (int i = 0; i < reps; ++i) f(i);
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3f / reps);
  }
  CHECK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(t);
}

struct Proj {
  const char* name;
  int64_t n, k;
  bool f32;
};

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  // Copy bandwidth (bytes read + written), 2 GiB buffers.
  const size_t copy_bytes = size_t{2} << 30;
  void *src = nullptr, *dst = nullptr;
  CHECK(cudaMalloc(&src, copy_bytes));
  CHECK(cudaMalloc(&dst, copy_bytes));
  const float copy_us = time_us(s, 3, [&](int) {
    CHECK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, s));
  });
  const double bw = 2.0 * copy_bytes / copy_us / 1e3;  // GB/s
  std::printf("copy bandwidth: %.0f GB/s\n", bw);
  CHECK(cudaFree(src));
  CHECK(cudaFree(dst));

  const Proj shapes[] = {{"qkv", 6144, 4096, false},
                          {"o", 4096, 4096, false},
                          {"gate_up", 28672, 4096, false},
                          {"down", 4096, 14336, false},
                          {"lm_head", 128256, 4096, true}};
  std::printf("\n%-8s %2s %9s %9s %9s %9s %9s   %s\n", "shape", "m", "v1 us", "prod us", "v1+pdl",
              "v3 us", "v4 us", "v1 / prod / v1+pdl / v3 / v4 as % of copy bandwidth");
  for (const Proj& sh : shapes) {
    const size_t wbytes = static_cast<size_t>(sh.n * sh.k) * 2;
    const int copies = static_cast<int>(std::max<size_t>(1, (size_t{400} << 20) / wbytes + 1));
    std::vector<__nv_bfloat16*> ws;
    for (int c = 0; c < copies; ++c) ws.push_back(alloc_bf16(sh.n * sh.k, 7 + c, 0.02f));
    auto* x = alloc_bf16(8 * 2 * sh.k, 3, 1.0f);
    void* y = nullptr;
    CHECK(cudaMalloc(&y, 8 * sh.n * 4));
    for (const int m : {1, 2, 4, 8}) {
      GemmParams p;
      p.x = x;
      p.y = y;
      p.m = m;
      p.n = sh.n;
      p.k = sh.k;
      p.dtype = DType::kBF16;
      p.y_dtype = sh.f32 ? DType::kF32 : DType::kBF16;
      auto with_w = [&](int i) {
        GemmParams q = p;
        q.w = ws[i % copies];
        return q;
      };
      const float t1 = time_us(s, 20, [&](int i) { v1::run(with_w(i), s); });
      const float t2 = time_us(s, 20, [&](int i) { gemv_cuda(with_w(i), s); });
      const float t4 = time_us(s, 20, [&](int i) { v1::run<true>(with_w(i), s); });
      float t3 = -1, t5 = -1;
      if (m == 1) t3 = time_us(s, 20, [&](int i) { v3::run<512, 8>(with_w(i), s, {0, true, true, 0}); });
      if (m == 1) t5 = time_us(s, 20, [&](int i) { v4::run(with_w(i), s); });
      GemmParams q = with_w(0);
      auto pct = [&](float us) { return us > 0 ? wbytes / us / 1e3 / bw * 100 : 0.0; };
      std::printf("%-8s %2d %9.1f %9.1f %9.1f %9.1f %9.1f   %3.0f%% / %3.0f%% / %3.0f%% / %3.0f%% / %3.0f%%\n",
                  sh.name, m, t1, t2, t4, t3, t5, pct(t1), pct(t2), pct(t4), pct(t3), pct(t5));
      // prod against v1 on the same input.
      {
        std::vector<float> a(m * sh.n), b(m * sh.n);
        const size_t ysz = sh.f32 ? 4 : 2;
        std::vector<char> ya(m * sh.n * ysz), yb(m * sh.n * ysz);
        v1::run(q, s);
        CHECK(cudaMemcpyAsync(ya.data(), y, ya.size(), cudaMemcpyDeviceToHost, s));
        gemv_cuda(q, s);
        CHECK(cudaMemcpyAsync(yb.data(), y, yb.size(), cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        double worst = 0, scale = 0;
        for (int64_t i = 0; i < m * sh.n; ++i) {
          float va, vb;
          if (sh.f32) {
            va = reinterpret_cast<float*>(ya.data())[i];
            vb = reinterpret_cast<float*>(yb.data())[i];
          } else {
            va = __bfloat162float(reinterpret_cast<__nv_bfloat16*>(ya.data())[i]);
            vb = __bfloat162float(reinterpret_cast<__nv_bfloat16*>(yb.data())[i]);
          }
          worst = std::max<double>(worst, std::fabs(va - vb));
          scale = std::max<double>(scale, std::fabs(va));
        }
        if (worst > 1e-2 * scale) std::printf("  MISMATCH v1/prod: max |diff| %g (max |y| %g)\n", worst, scale);
        if (m == 1) {
          v4::run(q, s);
          CHECK(cudaMemcpyAsync(yb.data(), y, yb.size(), cudaMemcpyDeviceToHost, s));
          CHECK(cudaStreamSynchronize(s));
          double worst4 = 0;
          for (int64_t i = 0; i < sh.n; ++i) {
            const float va = sh.f32 ? reinterpret_cast<float*>(ya.data())[i]
                                    : __bfloat162float(reinterpret_cast<__nv_bfloat16*>(ya.data())[i]);
            const float vb = sh.f32 ? reinterpret_cast<float*>(yb.data())[i]
                                    : __bfloat162float(reinterpret_cast<__nv_bfloat16*>(yb.data())[i]);
            worst4 = std::max<double>(worst4, std::fabs(va - vb));
          }
          std::printf("  v4 vs v1: max |diff| %g (max |y| %g)%s\n", worst4, scale,
                      worst4 > 1e-2 * scale ? "  MISMATCH" : "");
        }
      }
    }
    for (auto* w : ws) CHECK(cudaFree(w));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
  }

  // 32 layers of [qkv, o, gate_up, down] in one graph, m = 1.
  constexpr int kLayers = 32;
  const int64_t hidden = 4096, qkv_n = 6144, inter = 14336;
  struct Layer {
    __nv_bfloat16 *qkv, *o, *gate_up, *down, *n1, *n2;
  };
  std::vector<Layer> layers(kLayers);
  size_t total = 0;
  for (int l = 0; l < kLayers; ++l) {
    layers[l] = {alloc_bf16(qkv_n * hidden, 100 + l, 0.02f), alloc_bf16(hidden * hidden, 200 + l, 0.02f),
                 alloc_bf16(2 * inter * hidden, 300 + l, 0.02f), alloc_bf16(hidden * inter, 400 + l, 0.01f),
                 alloc_bf16(hidden, 500 + l, 1.0f), alloc_bf16(hidden, 600 + l, 1.0f)};
    total += (qkv_n * hidden + hidden * hidden + 2 * inter * hidden + hidden * inter) * 2;
  }
  auto* residual = alloc_bf16(hidden, 1, 1.0f);
  auto* normed = alloc_bf16(hidden, 2, 1.0f);
  auto* qkv = alloc_bf16(qkv_n, 3, 1.0f);
  auto* sub = alloc_bf16(hidden, 4, 0.0f);
  auto* gu = alloc_bf16(2 * inter, 5, 1.0f);
  auto* act = alloc_bf16(inter, 6, 1.0f);
  CHECK(cudaDeviceSynchronize());
  auto gp = [&](const void* xin, const void* w, void* yout, int64_t n, int64_t k) {
    GemmParams p;
    p.x = xin;
    p.w = w;
    p.y = yout;
    p.m = 1;
    p.n = n;
    p.k = k;
    p.dtype = p.y_dtype = DType::kBF16;
    return p;
  };
  auto norm = [&](const void* a, const void* w) {
    RmsNormParams r;
    r.add = a;
    r.residual = residual;
    r.weight = w;
    r.out = normed;
    r.rows = 1;
    r.dim = hidden;
    r.dtype = DType::kBF16;
    return r;
  };
  SwigluParams sw;
  sw.gate_up = gu;
  sw.out = act;
  sw.rows = 1;
  sw.inter = inter;
  sw.dtype = DType::kBF16;
  // One layer: rms_norm, qkv, stand-ins for RoPE (12 blocks, 4 us) and attention (128 blocks,
  // 9 us), o, rms_norm, gate_up, swiglu, down; the GEMVs by `gemv`.
  struct Variant {
    const char* name;
    std::function<void(const GemmParams&)> gemv;
  };
  auto v3run = [&](int threads, int unroll, v3::Knobs kn) {
    return std::function<void(const GemmParams&)>([=](const GemmParams& p) {
      if (threads == 256 && unroll == 16) v3::run<256, 16>(p, s, kn);
      else if (threads == 256 && unroll == 8) v3::run<256, 8>(p, s, kn);
      else v3::run<512, 8>(p, s, kn);
    });
  };
  const std::vector<Variant> variants = {
      {"v1", [&](const GemmParams& p) { v1::run(p, s); }},
      {"prod", [&](const GemmParams& p) { gemv_cuda(p, s); }},
      {"v1+pdl", [&](const GemmParams& p) { v1::run<true>(p, s); }},
      {"v3 512x8 fit pdl start", v3run(512, 8, {0, true, true, 0})},
      {"v3 512x8 fit pdl last", v3run(512, 8, {0, true, true, 1})},
      {"v3 512x8 fit no-pdl", v3run(512, 8, {0, false, false, 1})},
      {"v3 512x8 1/SM pdl start", v3run(512, 8, {1, true, true, 0})},
      {"v3 256x16 2/SM pdl start", v3run(256, 16, {2, true, true, 0})},
      {"v3 256x8 fit pdl start", v3run(256, 8, {0, true, true, 0})},
      {"v4 tma pdl", [&](const GemmParams& p) { v4::run(p, s); }},
      {"v1 again", [&](const GemmParams& p) { v1::run(p, s); }},
  };
  auto chain = [&](const Variant& v, bool pdl_standins) {
    for (int l = 0; l < kLayers; ++l) {
      const Layer& L = layers[l];
      rms_norm_cuda(norm(l == 0 ? nullptr : sub, L.n1), s);
      v.gemv(gp(normed, L.qkv, qkv, qkv_n, hidden));
      if (pdl_standins) {
        cuda::launch_pdl(spin<true>, 12, 128, 0, s, 4000LL);
        cuda::launch_pdl(spin<true>, 128, 128, 0, s, 9000LL);
      } else {
        spin<false><<<12, 128, 0, s>>>(4000);
        spin<false><<<128, 128, 0, s>>>(9000);
      }
      v.gemv(gp(normed, L.o, sub, hidden, hidden));
      rms_norm_cuda(norm(sub, L.n2), s);
      v.gemv(gp(normed, L.gate_up, gu, 2 * inter, hidden));
      swiglu_cuda(sw, s);
      v.gemv(gp(act, L.down, sub, hidden, inter));
    }
  };
  const double floor_us = total / bw / 1e3;
  std::printf("\n32 layers x [qkv, rope 4 us, attention 9 us, o, gate_up, down], m = 1, one graph:"
              " %.2f GB, floor %.1f us (+ 416 us of stand-ins)\n", total / 1e9, floor_us);
  // Plain stand-ins first (the figures of runs 4-24), then stand-ins launched under PDL (run 26).
  for (const bool pdl_standins : {false, true}) {
    std::printf(" stand-ins %s:\n", pdl_standins ? "launched with PDL, dependents at once" : "plain");
    for (const Variant& v : variants) {
      cudaGraph_t g;
      cudaGraphExec_t ge;
      CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      chain(v, pdl_standins);
      CHECK(cudaStreamEndCapture(s, &g));
      CHECK(cudaGraphInstantiate(&ge, g, 0));
      const float us = time_us(s, 5, [&](int) { CHECK(cudaGraphLaunch(ge, s)); });
      std::printf("  %-30s %8.1f us  %6.1f us per layer, %6.1f us over floor + stand-ins\n", v.name,
                  us, us / kLayers, (us - floor_us) / kLayers - 13.0);
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
    }
  }
  return 0;
}
