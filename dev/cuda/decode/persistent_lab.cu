// Persistent decode lab: a batch-1 decode step of Llama-3.1-8B (bf16) as ONE cooperative kernel
// of one 512-thread block per SM that runs every layer's phases separated by grid-wide barriers,
// instead of ~9 kernels per layer. Before arriving at a barrier, every block asks L2 for the
// start of its slice of the next projection's weights (prefetch.global.L2), so HBM keeps
// streaming through the barrier and the small phases (norm, attention) that sit between
// projections. The question it answers: how close to the weight-read floor can a decode step
// get once kernel boundaries are gone (dev/cuda/decode/README.md, "Next" item 1)?
//
// Per layer (H = 4096, 32 query heads, 8 kv heads, head_dim 128, I = 14336):
//   1 all blocks: x = rms_norm(residual) * norm1 (each block, into shared memory);
//                 qkv[6144] = W_qkv x                          -- barrier
//   2 blocks 0-31: attention of query head h over `ctx` keys (ctx - 1 cached + the new one
//                 from qkv), online softmax per warp, merged across warps -- barrier
//   3 all blocks: residual += W_o attn                          -- barrier
//   4 all blocks: x = rms_norm(residual) * norm2; act[i] = silu(gate_i . x) * (up_i . x)
//                                                               -- barrier
//   5 all blocks: residual += W_down act                        -- barrier
// Rows of a projection are split evenly over blocks, round-robin over a block's warps; a warp
// streams a row with 16-byte loads, 8 per lane in flight. Not modelled: RoPE and the paged
// cache write of the new K/V (a few hundred bytes), the LM head and top-k (per step, not per
// layer). Weights are bf16 [N, K] row-major like the engine's; the residual is fp32 here.
//
// Checks layer 0 against a CPU reference (same inputs, fp32/double), then times 32 layers at
// several prefetch depths and loads in flight against the floor: bytes of weights / copy
// bandwidth (measured here), with block 0's clock per phase.
// Build: dev/cuda/device_run.sh stage with LABS="dev/cuda/decode/persistent_lab.cu".
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

namespace {

using bf16 = __nv_bfloat16;

constexpr int kHidden = 4096, kHeads = 32, kKvHeads = 8, kHeadDim = 128, kInter = 14336;
constexpr int kQkv = (kHeads + 2 * kKvHeads) * kHeadDim;  // 6144
constexpr int kMaxCtx = 1024;
constexpr int kWarps = 16, kThreads = kWarps * 32;
// x (fp32, the longest K), then the attention merge: m, l and acc of every warp.
constexpr int kSmemBytes = (kInter + 2 * kWarps + kWarps * kHeadDim) * 4;

struct Layer {
  const bf16 *qkv, *o, *gate_up, *down;  // [6144, H], [H, H], [2 I, H] (gate rows, then up), [H, I]
  const bf16 *norm1, *norm2;             // [H]
  const bf16 *k_cache, *v_cache;         // [kMaxCtx, KH, D]
};

struct Params {
  const Layer* layers;
  int num_layers;
  int ctx;             // keys per head, the new token's included (2 .. kMaxCtx)
  int prefetch_bytes;  // per block and boundary: how much of its next slice to ask L2 for
  float* residual;     // [H]
  bf16* qkv;           // [6144]
  bf16* attn;          // [H]
  bf16* act;           // [I]
  unsigned* barrier;   // [2]: arrivals, generation
  long long* trace;    // [1 + 5 num_layers]: block 0's %globaltimer at the start and after
                       // each barrier (ns)
};

// ---- host/device deterministic weights ----
__host__ __device__ inline float hash_value(uint64_t i, uint32_t seed, float amp) {
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed ^ static_cast<uint32_t>(i >> 32);
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return amp * (static_cast<float>(h) * (2.0f / 4294967296.0f) - 1.0f);
}

__global__ void fill(bf16* x, int64_t n, uint32_t seed, float amp, float bias) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = __float2bfloat16_rn(bias + hash_value(i, seed, amp));
  }
}

// ---- device pieces ----
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ float dot8(const uint4& w, const float* x) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&w);
  const float4 a = *reinterpret_cast<const float4*>(x);
  const float4 b = *reinterpret_cast<const float4*>(x + 4);
  const float2 w0 = __bfloat1622float2(h[0]), w1 = __bfloat1622float2(h[1]);
  const float2 w2 = __bfloat1622float2(h[2]), w3 = __bfloat1622float2(h[3]);
  return w0.x * a.x + w0.y * a.y + w1.x * a.z + w1.y * a.w + w2.x * b.x + w2.y * b.y + w3.x * b.z +
         w3.y * b.w;
}

// Grid-wide barrier of a cooperative launch (all blocks resident). Arrivals count up to the
// grid size; the last block resets them and bumps the generation the others wait on.
__device__ void grid_sync(unsigned* barrier) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned gen;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(gen) : "l"(barrier + 1));
    __threadfence();
    if (atomicAdd(barrier, 1u) == gridDim.x - 1) {
      atomicExch(barrier, 0u);
      __threadfence();
      atomicAdd(barrier + 1, 1u);
    } else {
      unsigned now = gen;
      while (now == gen) {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(barrier + 1));
      }
    }
    __threadfence();
  }
  __syncthreads();
}

// Rows [begin, end) of an n-row projection for this block.
__device__ __forceinline__ int2 block_rows(int n) {
  return {static_cast<int>(int64_t{n} * blockIdx.x / gridDim.x),
          static_cast<int>(int64_t{n} * (blockIdx.x + 1) / gridDim.x)};
}

// Asks L2 for up to `bytes` of rows [r.x, r.y) of a [n, k] bf16 matrix (128-byte lines).
__device__ void prefetch_rows(const bf16* w, int k, int2 r, int bytes) {
  const char* base = reinterpret_cast<const char*>(w + int64_t{r.x} * k);
  const int64_t span = std::min<int64_t>(bytes, int64_t{r.y - r.x} * k * 2);
  for (int64_t off = threadIdx.x * 128; off < span; off += kThreads * 128) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(base + off));
  }
}

// y_r = W_r . xs for the block's rows, warp w taking rows begin + w, begin + w + kWarps, ...;
// kPair: also the row r + pair_offset (gate/up), epi(r, y_r, y_{r+offset}). xs: K floats in
// shared memory.
// kLoads: 16-byte loads in flight per lane (split over the two rows when kPair).
template <int K, bool kPair, int kLoads, typename Epi>
__device__ void gemv_rows(const bf16* w, const float* xs, int2 rows, int pair_offset, Epi epi) {
  constexpr int kPerLane = K / 8 / 32;  // 16-byte chunks per lane per row
  constexpr int kBatch = kPair ? kLoads / 2 : kLoads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int row = rows.x + warp; row < rows.y; row += kWarps) {
    const auto* w0 = reinterpret_cast<const uint4*>(w + int64_t{row} * K);
    const auto* w1 = reinterpret_cast<const uint4*>(w + int64_t{row + pair_offset} * K);
    float acc0 = 0.0f, acc1 = 0.0f;
#pragma unroll
    for (int b0 = 0; b0 < kPerLane; b0 += kBatch) {
      uint4 v0[kBatch], v1[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        if (b0 + u < kPerLane) {
          v0[u] = load_stream(w0 + (b0 + u) * 32 + lane);
          if constexpr (kPair) v1[u] = load_stream(w1 + (b0 + u) * 32 + lane);
        }
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        if (b0 + u < kPerLane) {
          const float* x = xs + ((b0 + u) * 32 + lane) * 8;
          acc0 += dot8(v0[u], x);
          if constexpr (kPair) acc1 += dot8(v1[u], x);
        }
      }
    }
    acc0 = warp_sum(acc0);
    if constexpr (kPair) acc1 = warp_sum(acc1);
    if (lane == 0) epi(row, acc0, acc1);
  }
}

// xs = residual * rsqrt(mean(residual^2) + eps) * norm (every block, redundantly).
__device__ void rms_norm_to_smem(const float* residual, const bf16* norm, float* xs,
                                 float* scratch) {
  constexpr int kPer = kHidden / 4 / kThreads;  // float4 of the residual per thread
  float4 v[kPer];
  uint2 w[kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int c = threadIdx.x + u * kThreads;
    v[u] = __ldcg(reinterpret_cast<const float4*>(residual) + c);
    w[u] = __ldg(reinterpret_cast<const uint2*>(norm) + c);
  }
  float ss = 0.0f;
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    ss += v[u].x * v[u].x + v[u].y * v[u].y + v[u].z * v[u].z + v[u].w * v[u].w;
  }
  ss = warp_sum(ss);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.0f;
  for (int i = 0; i < kWarps; ++i) total += scratch[i];
  const float inv = rsqrtf(total / kHidden + 1e-5f);
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int c = threadIdx.x + u * kThreads;
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[u].x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[u].y));
    *reinterpret_cast<float4*>(xs + 4 * c) =
        make_float4(v[u].x * inv * a.x, v[u].y * inv * a.y, v[u].z * inv * b.x, v[u].w * inv * b.y);
  }
  __syncthreads();
}

// xs[0, N) = src, bf16 written by other blocks: read through L2 (L1 is not coherent across
// the grid), every load issued before the first store.
template <int N>
__device__ void stage_to_smem(const bf16* src, float* xs) {
  constexpr int kChunks = N / 8, kPer = (kChunks + kThreads - 1) / kThreads;
  uint4 v[kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int c = threadIdx.x + u * kThreads;
    if (c < kChunks) v[u] = __ldcg(reinterpret_cast<const uint4*>(src) + c);
  }
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int c = threadIdx.x + u * kThreads;
    if (c < kChunks) {
      const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v[u]);
      const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
      const float2 d = __bfloat1622float2(h[2]), e = __bfloat1622float2(h[3]);
      *reinterpret_cast<float4*>(xs + 8 * c) = make_float4(a.x, a.y, b.x, b.y);
      *reinterpret_cast<float4*>(xs + 8 * c + 4) = make_float4(d.x, d.y, e.x, e.y);
    }
  }
  __syncthreads();
}

// Attention of query head h (block h) over p.ctx keys: warp w takes keys w, w + kWarps, ...;
// lane l holds dims 4l .. 4l + 3. The last key/value are the new token's, read from qkv.
template <int kBatch>
__device__ void attention_head(const Params& p, const Layer& L, int h, float* scratch) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, kh = h / (kHeads / kKvHeads);
  const float scale = rsqrtf(static_cast<float>(kHeadDim));
  auto load4 = [](const bf16* ptr) {
    const uint2 raw = __ldcg(reinterpret_cast<const uint2*>(ptr));
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
    return make_float4(a.x, a.y, b.x, b.y);
  };
  const float4 q = load4(p.qkv + h * kHeadDim + 4 * lane);
  float m = -INFINITY, l = 0.0f;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int j0 = warp; j0 < p.ctx; j0 += kWarps * kBatch) {
    float4 k[kBatch], v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int j = j0 + u * kWarps;
      if (j < p.ctx - 1) {
        const int64_t off = (int64_t{j} * kKvHeads + kh) * kHeadDim + 4 * lane;
        k[u] = load4(L.k_cache + off);
        v[u] = load4(L.v_cache + off);
      } else if (j == p.ctx - 1) {
        k[u] = load4(p.qkv + kHidden + kh * kHeadDim + 4 * lane);
        v[u] = load4(p.qkv + kHidden + kKvHeads * kHeadDim + kh * kHeadDim + 4 * lane);
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (j0 + u * kWarps >= p.ctx) break;
      const float s = warp_sum(q.x * k[u].x + q.y * k[u].y + q.z * k[u].z + q.w * k[u].w) * scale;
      const float m_new = fmaxf(m, s);
      const float corr = __expf(m - m_new), e = __expf(s - m_new);
      l = l * corr + e;
      acc = make_float4(acc.x * corr + e * v[u].x, acc.y * corr + e * v[u].y,
                        acc.z * corr + e * v[u].z, acc.w * corr + e * v[u].w);
      m = m_new;
    }
  }
  // Merge the warps: scratch = m[16], l[16], acc[16][128].
  float* sm = scratch;
  float* sl = scratch + kWarps;
  float* sacc = scratch + 2 * kWarps;
  if (lane == 0) {
    sm[warp] = m;
    sl[warp] = l;
  }
  *reinterpret_cast<float4*>(sacc + warp * kHeadDim + 4 * lane) = acc;
  __syncthreads();
  if (threadIdx.x < kHeadDim) {
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm[w]);
    float num = 0.0f, den = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float c = sm[w] == -INFINITY ? 0.0f : __expf(sm[w] - mx);
      num += sacc[w * kHeadDim + threadIdx.x] * c;
      den += sl[w] * c;
    }
    p.attn[h * kHeadDim + threadIdx.x] = __float2bfloat16_rn(num / den);
  }
  __syncthreads();
}

__device__ __forceinline__ void stamp(const Params& p, int i) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    p.trace[i] = t;
  }
}

// kLoads: weight loads in flight per lane; kBlocksPerSm: 1 or 2 resident blocks per SM (the
// grid is SMs x kBlocksPerSm; 2 halves the registers a thread may use).
template <int kLoads, int kBlocksPerSm>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) decode_step(Params p) {
  extern __shared__ float smem[];
  float* xs = smem;  // up to kInter floats
  float* scratch = smem + kInter;
  __shared__ float reduce[kWarps];
  const int2 qkv_rows = block_rows(kQkv), h_rows = block_rows(kHidden), i_rows = block_rows(kInter);
  stamp(p, 0);
  for (int li = 0; li < p.num_layers; ++li) {
    const Layer& L = p.layers[li];
    // 1: norm, qkv. Then ask L2 for o's rows (read in phase 3).
    rms_norm_to_smem(p.residual, L.norm1, xs, reduce);
    gemv_rows<kHidden, false, kLoads>(
        L.qkv, xs, qkv_rows, 0, [&](int r, float y, float) { p.qkv[r] = __float2bfloat16_rn(y); });
    prefetch_rows(L.o, kHidden, h_rows, p.prefetch_bytes);
    grid_sync(p.barrier);
    stamp(p, 1 + 5 * li + 0);
    // 2: attention on 32 blocks; the others ask L2 for the start of their gate/up rows.
    if (blockIdx.x < kHeads) {
      attention_head<8 / kBlocksPerSm>(p, L, blockIdx.x, scratch);
    } else {
      prefetch_rows(L.gate_up, kHidden, i_rows, p.prefetch_bytes / 2);
      prefetch_rows(L.gate_up + int64_t{kInter} * kHidden, kHidden, i_rows, p.prefetch_bytes / 2);
    }
    grid_sync(p.barrier);
    stamp(p, 1 + 5 * li + 1);
    // 3: o, residual add.
    stage_to_smem<kHidden>(p.attn, xs);
    gemv_rows<kHidden, false, kLoads>(L.o, xs, h_rows, 0,
                                      [&](int r, float y, float) { p.residual[r] += y; });
    if (blockIdx.x < kHeads) {
      prefetch_rows(L.gate_up, kHidden, i_rows, p.prefetch_bytes / 2);
      prefetch_rows(L.gate_up + int64_t{kInter} * kHidden, kHidden, i_rows, p.prefetch_bytes / 2);
    }
    grid_sync(p.barrier);
    stamp(p, 1 + 5 * li + 2);
    // 4: norm, gate/up with SwiGLU.
    rms_norm_to_smem(p.residual, L.norm2, xs, reduce);
    gemv_rows<kHidden, true, kLoads>(L.gate_up, xs, i_rows, kInter, [&](int r, float g, float u) {
      p.act[r] = __float2bfloat16_rn(g / (1.0f + __expf(-g)) * u);
    });
    prefetch_rows(L.down, kInter, h_rows, p.prefetch_bytes);
    grid_sync(p.barrier);
    stamp(p, 1 + 5 * li + 3);
    // 5: down, residual add. Then the next layer's qkv rows.
    stage_to_smem<kInter>(p.act, xs);
    gemv_rows<kInter, false, kLoads>(L.down, xs, h_rows, 0,
                                     [&](int r, float y, float) { p.residual[r] += y; });
    if (li + 1 < p.num_layers)
      prefetch_rows(p.layers[li + 1].qkv, kHidden, qkv_rows, p.prefetch_bytes);
    grid_sync(p.barrier);
    stamp(p, 1 + 5 * li + 4);
  }
}

// n grid barriers and nothing else: the cost of one.
__global__ void __launch_bounds__(kThreads, 1) barriers_only(unsigned* barrier, int n) {
  for (int i = 0; i < n; ++i) grid_sync(barrier);
}

// ---- host ----
float bf16_round(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

struct HostMatrix {
  std::vector<float> v;
  HostMatrix(int64_t n, uint32_t seed, float amp, float bias = 0.0f) : v(n) {
    for (int64_t i = 0; i < n; ++i) v[i] = bf16_round(bias + hash_value(i, seed, amp));
  }
};

bf16* device_fill(int64_t n, uint32_t seed, float amp, float bias = 0.0f) {
  bf16* p = nullptr;
  CHECK(cudaMalloc(&p, n * 2));
  fill<<<1024, 256>>>(p, n, seed, amp, bias);
  CHECK(cudaGetLastError());
  return p;
}

void gemv_ref(const std::vector<float>& w, const std::vector<float>& x, int n, int k,
              std::vector<float>& y) {
  y.assign(n, 0.0f);
  for (int r = 0; r < n; ++r) {
    double s = 0;
    for (int c = 0; c < k; ++c) s += double{w[int64_t{r} * k + c]} * x[c];
    y[r] = static_cast<float>(s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int ctx = argc > 1 ? std::atoi(argv[1]) : 256;
  if (ctx < 2 || ctx > kMaxCtx) {
    std::fprintf(stderr, "ctx must be in [2, %d]\n", kMaxCtx);
    return 1;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int grid = prop.multiProcessorCount;
  std::printf("device: %s, %d SMs, L2 %d MB; context %d\n", prop.name, grid, prop.l2CacheSize >> 20,
              ctx);
  // Variants: (loads in flight per lane, blocks per SM).
  struct Variant {
    int loads, per_sm;
    void* fn;
  };
  const Variant variants[] = {{8, 1, reinterpret_cast<void*>(decode_step<8, 1>)},
                              {16, 1, reinterpret_cast<void*>(decode_step<16, 1>)},
                              {8, 2, reinterpret_cast<void*>(decode_step<8, 2>)}};
  for (const Variant& v : variants) {
    CHECK(cudaFuncSetAttribute(v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, v.fn, kThreads, kSmemBytes));
    if (per_sm < v.per_sm) {
      std::fprintf(stderr, "decode_step<%d, %d>: only %d blocks fit an SM\n", v.loads, v.per_sm,
                   per_sm);
      return 1;
    }
  }

  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  // Copy bandwidth (bytes read + written), 2 GiB.
  double bw = 0;
  {
    const size_t bytes = size_t{2} << 30;
    void *a = nullptr, *b = nullptr;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    float best = 1e30f;
    for (int i = 0; i < 5; ++i) {
      CHECK(cudaEventRecord(e0));
      CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      best = std::min(best, ms);
    }
    bw = 2.0 * bytes / (best * 1e-3) / 1e9;
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
  }

  constexpr int kLayers = 32;
  std::vector<Layer> layers(kLayers);
  for (int l = 0; l < kLayers; ++l) {
    const uint32_t s = 1000 * (l + 1);
    layers[l] = {device_fill(int64_t{kQkv} * kHidden, s + 1, 0.03f),
                 device_fill(int64_t{kHidden} * kHidden, s + 2, 0.03f),
                 device_fill(2 * int64_t{kInter} * kHidden, s + 3, 0.03f),
                 device_fill(int64_t{kHidden} * kInter, s + 4, 0.015f),
                 device_fill(kHidden, s + 5, 0.2f, 1.0f),
                 device_fill(kHidden, s + 6, 0.2f, 1.0f),
                 device_fill(int64_t{kMaxCtx} * kKvHeads * kHeadDim, s + 7, 1.0f),
                 device_fill(int64_t{kMaxCtx} * kKvHeads * kHeadDim, s + 8, 1.0f)};
  }
  const double weight_bytes =
      2.0 * kLayers * (double{kQkv} * kHidden + double{kHidden} * kHidden + 3.0 * kInter * kHidden);
  Layer* d_layers = nullptr;
  CHECK(cudaMalloc(&d_layers, sizeof(Layer) * kLayers));
  CHECK(cudaMemcpy(d_layers, layers.data(), sizeof(Layer) * kLayers, cudaMemcpyHostToDevice));
  float* residual = nullptr;
  bf16 *qkv = nullptr, *attn = nullptr, *act = nullptr;
  unsigned* barrier = nullptr;
  long long* trace = nullptr;
  CHECK(cudaMalloc(&trace, (1 + 5 * kLayers) * sizeof(long long)));
  CHECK(cudaMalloc(&residual, kHidden * 4));
  CHECK(cudaMalloc(&qkv, kQkv * 2));
  CHECK(cudaMalloc(&attn, kHidden * 2));
  CHECK(cudaMalloc(&act, kInter * 2));
  CHECK(cudaMalloc(&barrier, 8));
  CHECK(cudaMemset(barrier, 0, 8));
  std::vector<float> x0(kHidden);
  for (int i = 0; i < kHidden; ++i) x0[i] = hash_value(i, 77, 1.0f);
  auto reset_residual = [&] {
    CHECK(cudaMemcpy(residual, x0.data(), kHidden * 4, cudaMemcpyHostToDevice));
  };
  auto launch = [&](int num_layers, int prefetch, const Variant& v) {
    Params p{d_layers, num_layers, ctx, prefetch, residual, qkv, attn, act, barrier, trace};
    void* args[] = {&p};
    CHECK(cudaLaunchCooperativeKernel(v.fn, dim3(grid * v.per_sm), dim3(kThreads), args, kSmemBytes,
                                      nullptr));
  };
  CHECK(cudaDeviceSynchronize());

  // Layer 0 against the CPU.
  {
    const uint32_t s = 1000;
    HostMatrix wqkv(int64_t{kQkv} * kHidden, s + 1, 0.03f),
        wo(int64_t{kHidden} * kHidden, s + 2, 0.03f),
        wgu(2 * int64_t{kInter} * kHidden, s + 3, 0.03f),
        wd(int64_t{kHidden} * kInter, s + 4, 0.015f), n1(kHidden, s + 5, 0.2f, 1.0f),
        n2(kHidden, s + 6, 0.2f, 1.0f), kc(int64_t{kMaxCtx} * kKvHeads * kHeadDim, s + 7, 1.0f),
        vc(int64_t{kMaxCtx} * kKvHeads * kHeadDim, s + 8, 1.0f);
    std::vector<float> res = x0, x(kHidden), y;
    auto norm = [&](const std::vector<float>& w) {
      double ss = 0;
      for (float v : res) ss += double{v} * v;
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss / kHidden) + 1e-5f);
      for (int i = 0; i < kHidden; ++i) x[i] = res[i] * inv * w[i];
    };
    norm(n1.v);
    std::vector<float> q;
    gemv_ref(wqkv.v, x, kQkv, kHidden, q);
    for (float& v : q) v = bf16_round(v);
    std::vector<float> at(kHidden);
    for (int h = 0; h < kHeads; ++h) {
      const int kh = h / (kHeads / kKvHeads);
      std::vector<double> sc(ctx);
      double mx = -1e300;
      for (int j = 0; j < ctx; ++j) {
        double d = 0;
        for (int e = 0; e < kHeadDim; ++e) {
          const float kv = j < ctx - 1 ? kc.v[(int64_t{j} * kKvHeads + kh) * kHeadDim + e]
                                       : q[kHidden + kh * kHeadDim + e];
          d += double{q[h * kHeadDim + e]} * kv;
        }
        sc[j] = d / std::sqrt(double{kHeadDim});
        mx = std::max(mx, sc[j]);
      }
      double den = 0;
      for (double& v : sc) den += (v = std::exp(v - mx));
      for (int e = 0; e < kHeadDim; ++e) {
        double o = 0;
        for (int j = 0; j < ctx; ++j) {
          const float vv = j < ctx - 1 ? vc.v[(int64_t{j} * kKvHeads + kh) * kHeadDim + e]
                                       : q[kHidden + kKvHeads * kHeadDim + kh * kHeadDim + e];
          o += sc[j] * vv;
        }
        at[h * kHeadDim + e] = bf16_round(static_cast<float>(o / den));
      }
    }
    gemv_ref(wo.v, at, kHidden, kHidden, y);
    for (int i = 0; i < kHidden; ++i) res[i] += y[i];
    norm(n2.v);
    std::vector<float> gu;
    gemv_ref(wgu.v, x, 2 * kInter, kHidden, gu);
    std::vector<float> a(kInter);
    for (int i = 0; i < kInter; ++i) {
      const float g = gu[i], u = gu[kInter + i];
      a[i] = bf16_round(g / (1.0f + std::exp(-g)) * u);
    }
    gemv_ref(wd.v, a, kHidden, kInter, y);
    for (int i = 0; i < kHidden; ++i) res[i] += y[i];
    for (const Variant& v : variants) {
      reset_residual();
      launch(1, 64 << 10, v);
      std::vector<float> got(kHidden);
      CHECK(cudaMemcpy(got.data(), residual, kHidden * 4, cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      for (int i = 0; i < kHidden; ++i) {
        num += (double{got[i]} - res[i]) * (double{got[i]} - res[i]);
        den += double{res[i]} * res[i];
      }
      const double rel = std::sqrt(num / den);
      std::printf("layer 0 vs CPU, %d loads x %d blocks/SM: rel L2 %.2e %s\n", v.loads, v.per_sm,
                  rel, rel < 2e-2 ? "(ok)" : "(MISMATCH)");
    }
  }

  std::printf(
      "copy bandwidth %.0f GB/s; 32 layers of weights %.2f GB, floor %.1f us (%.1f us "
      "per layer)\n",
      bw, weight_bytes / 1e9, weight_bytes / bw / 1e3, weight_bytes / bw / 1e3 / kLayers);
  {
    int n = 160;
    void* args[] = {&barrier, &n};
    float best = 1e30f;
    for (int rep = 0; rep < 5; ++rep) {
      CHECK(cudaEventRecord(e0));
      CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(barriers_only), dim3(grid),
                                        dim3(kThreads), args, 0, nullptr));
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      best = std::min(best, ms);
    }
    std::printf("grid barrier (%d blocks): %.2f us each\n", grid, best * 1e3 / n);
  }
  // Per phase (block 0's clock between barriers, layers 1-31, each phase ending at its
  // barrier): 1 norm + qkv, 2 attention, 3 o, 4 norm + gate/up, 5 down.
  std::printf(
      "%-6s %-9s %9s %9s %8s | %7s %7s %7s %7s %7s  (phase us, floor %.1f %.1f %.1f %.1f)\n",
      "variant", "prefetch", "us/step", "us/layer", "floor", "qkv", "attn", "o", "gate_up", "down",
      2.0 * kQkv * kHidden / bw / 1e3, 2.0 * kHidden * kHidden / bw / 1e3,
      4.0 * kInter * kHidden / bw / 1e3, 2.0 * kInter * kHidden / bw / 1e3);
  for (const Variant& v : variants) {
    for (const int kb : {0, 64}) {
      reset_residual();
      launch(kLayers, kb << 10, v);  // warm-up
      CHECK(cudaDeviceSynchronize());
      std::vector<float> times;
      for (int rep = 0; rep < 7; ++rep) {
        CHECK(cudaEventRecord(e0));
        launch(kLayers, kb << 10, v);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        times.push_back(ms * 1e3f);
      }
      std::vector<long long> t(1 + 5 * kLayers);
      CHECK(cudaMemcpy(t.data(), trace, t.size() * sizeof(long long), cudaMemcpyDeviceToHost));
      double phase[5] = {};
      for (int l = 1; l < kLayers; ++l) {
        for (int ph = 0; ph < 5; ++ph) phase[ph] += (t[1 + 5 * l + ph] - t[5 * l + ph]) / 1e3;
      }
      std::sort(times.begin(), times.end());
      const double us = times[times.size() / 2];
      std::printf("%2dx%d   %6d KB %9.1f %9.1f %7.1f%% | %7.1f %7.1f %7.1f %7.1f %7.1f\n", v.loads,
                  v.per_sm, kb, us, us / kLayers, 100.0 * weight_bytes / bw / 1e3 / us,
                  phase[0] / (kLayers - 1), phase[1] / (kLayers - 1), phase[2] / (kLayers - 1),
                  phase[3] / (kLayers - 1), phase[4] / (kLayers - 1));
    }
  }
  return 0;
}
