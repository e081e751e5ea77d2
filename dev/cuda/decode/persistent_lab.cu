// Persistent decode lab: a batch-1 decode step of Llama-3.1-8B (bf16) as ONE cooperative kernel
// of two 512-thread blocks per SM that runs every layer's phases separated by grid-wide
// barriers, instead of ~9 kernels per layer. The question it answers: how close to the
// weight-read floor can a decode step get once kernel boundaries are gone
// (dev/cuda/decode/README.md, attempt 7)?
//
// Per layer (H = 4096, 32 query heads, 8 kv heads, head_dim 128, I = 14336):
//   1 all blocks: x = rms_norm(residual) * norm1 (each block, into shared memory);
//                 qkv[6144] = W_qkv x                                  -- barrier
//   2 all blocks: split-KV attention: block b takes kv head b % 8 and part b / 8 of the keys
//                 (ctx - 1 cached + the new one from qkv) for the 4 query heads of the group,
//                 writes its partial softmax state; the last block of a kv head to finish
//                 merges the parts into attn                            -- barrier
//   3 all blocks: residual += W_o attn                                  -- barrier
//   4 all blocks: x = rms_norm(residual) * norm2; act[i] = silu(gate_i . x) * (up_i . x)
//                                                                       -- barrier
//   5 all blocks: residual += W_down act                                -- barrier
// Projections: a block takes an even share of the rows; within the block the rows' 512-byte
// slabs (one 16-byte load per lane) are split evenly over the warps, so a warp may end one row
// and start the next; row sums meet in shared memory. Before arriving at a barrier each warp
// copies (cp.async) the first `prefetch_slabs` slabs of its share of the NEXT projection into
// shared memory, so HBM keeps streaming through the barrier and the norm, staging and attention
// work in between, and the next projection starts on data already on chip.
// Not modelled: RoPE and the paged cache write of the new K/V (a few hundred bytes), the LM
// head and top-k (per step). Weights are bf16 [N, K] row-major like the engine's; the residual
// is fp32 here.
//
// Checks layer 0 against a CPU reference (same inputs, double sums), then times 32 layers with
// and without the cross-barrier prefetch against the floor (bytes of weights / copy bandwidth,
// measured here), with block 0's clock per phase, and the cost of one grid barrier.
// Build: dev/cuda/device_run.sh stage with LABS="dev/cuda/decode/persistent_lab.cu"; run:
// persistent_lab [context, default 256].
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ops/cuda_common.cuh"

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
using inflight::cuda::warp_sum;

constexpr int kHidden = 4096, kHeads = 32, kKvHeads = 8, kHeadDim = 128, kInter = 14336;
constexpr int kGroup = kHeads / kKvHeads;                 // query heads per kv head: 4
constexpr int kQkv = (kHeads + 2 * kKvHeads) * kHeadDim;  // 6144
constexpr int kMaxCtx = 1024;
constexpr int kWarps = 16, kThreads = kWarps * 32, kBlocksPerSm = 2;
constexpr int kMaxPrefetch = 4;   // slabs per warp copied ahead of a barrier
constexpr int kMaxRowSums = 128;  // rows (gate and up counted apart) a block may own
constexpr int kMaxPartKeys = 64;  // keys of one split-KV part
static_assert(kGroup * kHeadDim == kThreads, "attention: one thread per (query head, dim)");

// Dynamic shared memory: x (fp32, the longest K), the row sums, the attention scores, then the
// prefetched slabs (16-byte aligned).
constexpr int kXsFloats = kInter, kScoreFloats = kMaxPartKeys * kGroup;
constexpr int kPrefetchOffset = (kXsFloats + kMaxRowSums + kScoreFloats) * 4;
constexpr int kSmemBytes = kPrefetchOffset + kWarps * kMaxPrefetch * 32 * 16;
static_assert(kPrefetchOffset % 16 == 0, "aligned slabs");

struct Layer {
  const bf16 *qkv, *o, *gate_up, *down;  // [6144, H], [H, H], [2 I, H] (gate rows, then up), [H, I]
  const bf16 *norm1, *norm2;             // [H]
  const bf16 *k_cache, *v_cache;         // [kMaxCtx, KH, D]
};

struct Params {
  const Layer* layers;
  int num_layers;
  int ctx;                     // keys per head, the new token's included (2 .. kMaxCtx)
  int prefetch_slabs;          // 0 .. kMaxPrefetch
  float* residual;             // [H]
  bf16* qkv;                   // [6144]
  bf16* attn;                  // [H]
  bf16* act;                   // [I]
  float2* part_ml;             // [KH, parts, kGroup] (max, sum) of each split-KV part
  float* part_acc;             // [KH, parts, kGroup, D]
  unsigned* part_done;         // [KH] parts finished (0 between layers)
  unsigned* barrier;           // [2]: arrivals, generation
  long long* trace;            // [1 + 5 num_layers]: block 0's %globaltimer at the start and after
                               // each barrier (ns)
  long long* attention_trace;  // [4 num_layers]: block 0 after its scores, after its values,
                               // after its ticket; kv head 0's merge done
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

__device__ __forceinline__ float4 load_bf16x4(const bf16* ptr) {
  const uint2 raw = __ldcg(reinterpret_cast<const uint2*>(ptr));
  const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  return make_float4(a.x, a.y, b.x, b.y);
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

// A projection as this block sees it: rows [row0, row0 + rows) of a [n, K] matrix, and with
// `pair` also the same rows `pair_offset` further (gate, then up: "virtual" rows rows ..
// 2 rows - 1). A slab is 32 x 16 bytes of one row; warp w owns slabs [begin, end) of the
// block's virtual rows, an even share.
template <int K>
struct Share {
  static constexpr int kSlabsPerRow = K / 256;
  const bf16* w;
  int row0, rows, pair_offset;
  bool pair;
  int begin, end;

  __device__ Share(const bf16* w_, int n, bool pair_, int pair_offset_)
      : w(w_), pair_offset(pair_offset_), pair(pair_) {
    row0 = static_cast<int>(int64_t{n} * blockIdx.x / gridDim.x);
    rows = static_cast<int>(int64_t{n} * (blockIdx.x + 1) / gridDim.x) - row0;
    const int total = (pair ? 2 * rows : rows) * kSlabsPerRow, warp = threadIdx.x / 32;
    begin = total * warp / kWarps;
    end = total * (warp + 1) / kWarps;
  }
  // This lane's 16 bytes of slab s.
  __device__ const uint4* lane_ptr(int s) const {
    const int vrow = s / kSlabsPerRow, col = (s % kSlabsPerRow) * 32 + threadIdx.x % 32;
    const int row = vrow < rows ? row0 + vrow : pair_offset + row0 + vrow - rows;
    return reinterpret_cast<const uint4*>(w + int64_t{row} * K) + col;
  }
};

__device__ __forceinline__ uint4* prefetch_slot(uint4* pf, int u) {
  return pf + ((threadIdx.x / 32) * kMaxPrefetch + u) * 32 + threadIdx.x % 32;
}

// Copies the first n slabs of this warp's share into its prefetch slots (each lane its own 16
// bytes: the lane that reads them back is the one that copied them).
template <int K>
__device__ void prefetch_share(const Share<K>& sh, uint4* pf, int n) {
  for (int u = 0; u < n && sh.begin + u < sh.end; ++u) {
    const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(prefetch_slot(pf, u)));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst),
                 "l"(sh.lane_ptr(sh.begin + u)));
  }
  asm volatile("cp.async.commit_group;");
}

// y_vrow = W_vrow . xs over the share (the first n slabs from the prefetch slots), then
// epi(row, y_row, y_{row + pair_offset}) for the block's rows. sums: kMaxRowSums floats.
// kLoadsOnly: fold the raw weight bits instead of the dot product (the memory side alone; the
// output is meaningless).
// kLoads: 16-byte weight loads in flight per lane.
template <int K, int kLoads, bool kLoadsOnly, typename Epi>
__device__ void gemv_share(const Share<K>& sh, const float* xs, const uint4* pf, int n, float* sums,
                           Epi epi) {
  constexpr int kSpr = Share<K>::kSlabsPerRow;
  const int lane = threadIdx.x % 32, vrows = sh.pair ? 2 * sh.rows : sh.rows;
  for (int r = threadIdx.x; r < vrows; r += kThreads) sums[r] = 0.0f;
  if (n > 0) asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  float acc = 0.0f;
  int cur = -1;
  for (int s0 = sh.begin; s0 < sh.end; s0 += kLoads) {
    uint4 v[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int s = s0 + u;
      if (s < sh.end)
        v[u] = s - sh.begin < n ? *prefetch_slot(const_cast<uint4*>(pf), s - sh.begin)
                                : load_stream(sh.lane_ptr(s));
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int s = s0 + u;
      if (s >= sh.end) break;
      const int vrow = s / kSpr;
      if (vrow != cur) {
        if (cur >= 0) {
          const float total = warp_sum(acc);
          if (lane == 0) atomicAdd(sums + cur, total);
        }
        cur = vrow;
        acc = 0.0f;
      }
      if constexpr (kLoadsOnly) {
        acc += __int_as_float((v[u].x ^ v[u].y ^ v[u].z ^ v[u].w) & 0x3f800000u);
      } else {
        acc += dot8(v[u], xs + ((s % kSpr) * 32 + lane) * 8);
      }
    }
  }
  if (cur >= 0) {
    const float total = warp_sum(acc);
    if (lane == 0) atomicAdd(sums + cur, total);
  }
  __syncthreads();
  for (int r = threadIdx.x; r < sh.rows; r += kThreads) {
    epi(sh.row0 + r, sums[r], sh.pair ? sums[sh.rows + r] : 0.0f);
  }
}

// xs = residual * rsqrt(mean(residual^2) + eps) * norm (every block, redundantly; the residual
// was written by other blocks: read through L2, L1 is not coherent across the grid).
__device__ void rms_norm_to_smem(const float* residual, const bf16* norm, float* xs) {
  __shared__ float partial[kWarps];
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
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.0f;
  for (int i = 0; i < kWarps; ++i) total += partial[i];
  const float inv = rsqrtf(total / kHidden + 1e-5f);
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int c = threadIdx.x + u * kThreads;
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[u].x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[u].y));
    *reinterpret_cast<float4*>(xs + 4 * c) =
        make_float4(v[u].x * inv * a.x, v[u].y * inv * a.y, v[u].z * inv * b.x, v[u].w * inv * b.y);
  }
  // gemv_share's first __syncthreads publishes xs.
}

// xs[0, N) = src, bf16 written by other blocks (through L2), in rounds of two 16-byte loads
// per thread issued before their stores.
template <int N>
__device__ void stage_to_smem(const bf16* src, float* xs) {
  constexpr int kChunks = N / 8, kRound = 2;
  for (int c0 = threadIdx.x; c0 < kChunks; c0 += kRound * kThreads) {
    uint4 v[kRound];
#pragma unroll
    for (int u = 0; u < kRound; ++u) {
      const int c = c0 + u * kThreads;
      if (c < kChunks) v[u] = __ldcg(reinterpret_cast<const uint4*>(src) + c);
    }
#pragma unroll
    for (int u = 0; u < kRound; ++u) {
      const int c = c0 + u * kThreads;
      if (c < kChunks) {
        const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v[u]);
        const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
        const float2 d = __bfloat1622float2(h[2]), e = __bfloat1622float2(h[3]);
        *reinterpret_cast<float4*>(xs + 8 * c) = make_float4(a.x, a.y, b.x, b.y);
        *reinterpret_cast<float4*>(xs + 8 * c + 4) = make_float4(d.x, d.y, e.x, e.y);
      }
    }
  }
}

// %globaltimer (ns) into trace[i], by thread 0 of block `block`.
__device__ __forceinline__ void stamp(long long* trace, int i, int block = 0) {
  if (blockIdx.x == block && threadIdx.x == 0) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    trace[i] = t;
  }
}

// Split-KV attention, phase 2 (see the top). parts = gridDim.x / KH blocks per kv head; part
// `part` takes keys [part * kpp, (part + 1) * kpp) of the context. Scores: warp w the keys
// w, w + kWarps, ... of the part, all kGroup heads at once (lane l: dims 4l .. 4l + 3); then
// thread t = (head t / D, dim t % D) folds the part's values.
// at: 4 timestamps of this layer's attention (see Params::attention_trace).
__device__ void attention_part(const Params& p, const Layer& L, float* scores, long long* at) {
  __shared__ bool last;
  const int parts = gridDim.x / kKvHeads;
  const int kh = blockIdx.x % kKvHeads, part = blockIdx.x / kKvHeads;
  if (part >= parts) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kpp = (p.ctx + parts - 1) / parts;
  const int j0 = part * kpp, n = max(0, min(p.ctx, j0 + kpp) - j0);  // n <= kMaxPartKeys
  const float scale = rsqrtf(static_cast<float>(kHeadDim));
  const bf16* k_new = p.qkv + kHidden + kh * kHeadDim;
  const bf16* v_new = k_new + kKvHeads * kHeadDim;
  auto key_row = [&](int j) {
    return j < p.ctx - 1 ? L.k_cache + (int64_t{j} * kKvHeads + kh) * kHeadDim : k_new;
  };
  auto value_row = [&](int j) {
    return j < p.ctx - 1 ? L.v_cache + (int64_t{j} * kKvHeads + kh) * kHeadDim : v_new;
  };
  float4 q[kGroup];
#pragma unroll
  for (int g = 0; g < kGroup; ++g)
    q[g] = load_bf16x4(p.qkv + (kh * kGroup + g) * kHeadDim + 4 * lane);
  for (int jl = warp; jl < n; jl += kWarps) {
    const float4 k = load_bf16x4(key_row(j0 + jl) + 4 * lane);
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      const float s = warp_sum(q[g].x * k.x + q[g].y * k.y + q[g].z * k.z + q[g].w * k.w);
      if (lane == 0) scores[jl * kGroup + g] = s * scale;
    }
  }
  // Thread (g, d): its values while the scores land.
  const int g = threadIdx.x / kHeadDim, d = threadIdx.x % kHeadDim;
  constexpr int kRound = 8;
  float vals[kRound];  // values of the part, in rounds of kRound keys
  __syncthreads();
  stamp(at, 0);
  float m = -INFINITY;
  for (int jl = 0; jl < n; ++jl) m = fmaxf(m, scores[jl * kGroup + g]);
  float l = 0.0f, acc = 0.0f;
  for (int j1 = 0; j1 < n; j1 += kRound) {
#pragma unroll
    for (int u = 0; u < kRound; ++u) {
      if (j1 + u < n) vals[u] = __bfloat162float(__ldcg(value_row(j0 + j1 + u) + d));
    }
#pragma unroll
    for (int u = 0; u < kRound; ++u) {
      if (j1 + u < n) {
        const float e = __expf(scores[(j1 + u) * kGroup + g] - m);
        l += e;
        acc += e * vals[u];
      }
    }
  }
  stamp(at, 1);
  const int item = (kh * parts + part) * kGroup + g;
  p.part_acc[int64_t{item} * kHeadDim + d] = acc;
  if (d == 0) p.part_ml[item] = make_float2(m, l);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(p.part_done + kh, 1u) == static_cast<unsigned>(parts - 1);
  __syncthreads();
  stamp(at, 2);
  if (!last) return;
  __threadfence();
  // The last part of kv head kh merges all of them: thread (g, d).
  float mx = -INFINITY;
#pragma unroll 8
  for (int pi = 0; pi < parts; ++pi) {
    mx = fmaxf(mx, __ldcg(&p.part_ml[(kh * parts + pi) * kGroup + g].x));
  }
  float num = 0.0f, den = 0.0f;
#pragma unroll 8
  for (int pi = 0; pi < parts; ++pi) {
    const int it = (kh * parts + pi) * kGroup + g;
    const float2 ml = __ldcg(p.part_ml + it);
    const float c = ml.x == -INFINITY ? 0.0f : __expf(ml.x - mx);
    num += c * __ldcg(p.part_acc + int64_t{it} * kHeadDim + d);
    den += c * ml.y;
  }
  p.attn[(kh * kGroup + g) * kHeadDim + d] = __float2bfloat16_rn(num / den);
  if (threadIdx.x == 0) {
    p.part_done[kh] = 0;
    if (kh == 0) {
      long long t;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
      at[3] = t;
    }
  }
}

template <int kLoads, bool kLoadsOnly>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) decode_step(Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* xs = reinterpret_cast<float*>(smem);
  float* sums = xs + kXsFloats;
  float* scores = sums + kMaxRowSums;
  uint4* pf = reinterpret_cast<uint4*>(smem + kPrefetchOffset);
  const int npf = p.prefetch_slabs;
  stamp(p.trace, 0);
  if (npf > 0) prefetch_share(Share<kHidden>(p.layers[0].qkv, kQkv, false, 0), pf, npf);
  for (int li = 0; li < p.num_layers; ++li) {
    const Layer& L = p.layers[li];
    // Shares are rebuilt where used (cheap) rather than kept live across phases (registers).
    auto qkv = [&] { return Share<kHidden>(L.qkv, kQkv, false, 0); };
    auto o = [&] { return Share<kHidden>(L.o, kHidden, false, 0); };
    auto gate_up = [&] { return Share<kHidden>(L.gate_up, kInter, true, kInter); };
    auto down = [&] { return Share<kInter>(L.down, kHidden, false, 0); };
    // 1: norm, qkv.
    rms_norm_to_smem(p.residual, L.norm1, xs);
    gemv_share<kHidden, kLoads, kLoadsOnly>(qkv(), xs, pf, npf, sums, [&](int r, float y, float) {
      p.qkv[r] = __float2bfloat16_rn(y);
    });
    if (npf > 0) prefetch_share(o(), pf, npf);
    grid_sync(p.barrier);
    stamp(p.trace, 1 + 5 * li);
    // 2: attention.
    attention_part(p, L, scores, p.attention_trace + 4 * li);
    grid_sync(p.barrier);
    stamp(p.trace, 2 + 5 * li);
    // 3: o, residual add.
    stage_to_smem<kHidden>(p.attn, xs);
    gemv_share<kHidden, kLoads, kLoadsOnly>(o(), xs, pf, npf, sums,
                                            [&](int r, float y, float) { p.residual[r] += y; });
    if (npf > 0) prefetch_share(gate_up(), pf, npf);
    grid_sync(p.barrier);
    stamp(p.trace, 3 + 5 * li);
    // 4: norm, gate/up with SwiGLU.
    rms_norm_to_smem(p.residual, L.norm2, xs);
    gemv_share<kHidden, kLoads, kLoadsOnly>(
        gate_up(), xs, pf, npf, sums, [&](int r, float g, float u) {
          p.act[r] = __float2bfloat16_rn(g / (1.0f + __expf(-g)) * u);
        });
    if (npf > 0) prefetch_share(down(), pf, npf);
    grid_sync(p.barrier);
    stamp(p.trace, 4 + 5 * li);
    // 5: down, residual add; then the next layer's first qkv slabs.
    stage_to_smem<kInter>(p.act, xs);
    gemv_share<kInter, kLoads, kLoadsOnly>(down(), xs, pf, npf, sums,
                                           [&](int r, float y, float) { p.residual[r] += y; });
    if (npf > 0 && li + 1 < p.num_layers) {
      prefetch_share(Share<kHidden>(p.layers[li + 1].qkv, kQkv, false, 0), pf, npf);
    }
    grid_sync(p.barrier);
    stamp(p.trace, 5 + 5 * li);
  }
}

// n grid barriers and nothing else: the cost of one.
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) barriers_only(unsigned* barrier, int n) {
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
  const int grid = prop.multiProcessorCount * kBlocksPerSm;
  std::printf("device: %s, %d SMs, L2 %d MB; context %d; grid %d x %d threads\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, ctx, grid, kThreads);
  // Variants: weight loads in flight per lane; the memory side alone.
  struct Variant {
    int loads;
    bool loads_only;
    void* fn;
  };
  const Variant variants[] = {{2, false, reinterpret_cast<void*>(decode_step<2, false>)},
                              {4, false, reinterpret_cast<void*>(decode_step<4, false>)},
                              {8, false, reinterpret_cast<void*>(decode_step<8, false>)},
                              {4, true, reinterpret_cast<void*>(decode_step<4, true>)},
                              {8, true, reinterpret_cast<void*>(decode_step<8, true>)}};
  for (const Variant& v : variants) {
    CHECK(cudaFuncSetAttribute(v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, v.fn, kThreads, kSmemBytes));
    if (per_sm < kBlocksPerSm) {
      std::fprintf(stderr, "decode_step: only %d blocks fit an SM\n", per_sm);
      return 1;
    }
  }
  const int parts = grid / kKvHeads;
  if ((ctx + parts - 1) / parts > kMaxPartKeys) {
    std::fprintf(stderr, "context %d needs more than %d keys per part\n", ctx, kMaxPartKeys);
    return 1;
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
  unsigned *barrier = nullptr, *part_done = nullptr;
  float2* part_ml = nullptr;
  float* part_acc = nullptr;
  CHECK(cudaMalloc(&part_ml, sizeof(float2) * kKvHeads * parts * kGroup));
  CHECK(cudaMalloc(&part_acc, sizeof(float) * kKvHeads * parts * kGroup * kHeadDim));
  CHECK(cudaMalloc(&part_done, sizeof(unsigned) * kKvHeads));
  CHECK(cudaMemset(part_done, 0, sizeof(unsigned) * kKvHeads));
  long long *trace = nullptr, *attention_trace = nullptr;
  CHECK(cudaMalloc(&attention_trace, 4 * kLayers * sizeof(long long)));
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
  auto launch = [&](int num_layers, int prefetch_slabs, const Variant& v) {
    Params p{d_layers, num_layers, ctx,      prefetch_slabs, residual, qkv,   attn,
             act,      part_ml,    part_acc, part_done,      barrier,  trace, attention_trace};
    void* args[] = {&p};
    CHECK(cudaLaunchCooperativeKernel(v.fn, dim3(grid), dim3(kThreads), args, kSmemBytes, nullptr));
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
    for (const int slabs : {0, kMaxPrefetch}) {
      reset_residual();
      launch(1, slabs, variants[2]);
      std::vector<float> got(kHidden);
      CHECK(cudaMemcpy(got.data(), residual, kHidden * 4, cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      for (int i = 0; i < kHidden; ++i) {
        num += (double{got[i]} - res[i]) * (double{got[i]} - res[i]);
        den += double{res[i]} * res[i];
      }
      const double rel = std::sqrt(num / den);
      std::printf("layer 0 vs CPU, %d slabs prefetched: rel L2 %.2e %s\n", slabs, rel,
                  rel < 2e-2 ? "(ok)" : "(MISMATCH)");
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
  std::printf("%-14s %9s %9s %8s | %7s %7s %7s %7s %7s  (phase us, floor %.1f %.1f %.1f %.1f)\n",
              "slabs, loads", "us/step", "us/layer", "floor", "qkv", "attn", "o", "gate_up", "down",
              2.0 * kQkv * kHidden / bw / 1e3, 2.0 * kHidden * kHidden / bw / 1e3,
              4.0 * kInter * kHidden / bw / 1e3, 2.0 * kInter * kHidden / bw / 1e3);
  // "mem": the projections fold raw weight bits instead of multiplying (memory alone).
  for (const Variant& v : variants) {
    for (const int slabs : {0, 4}) {
      reset_residual();
      launch(kLayers, slabs, v);  // warm-up
      CHECK(cudaDeviceSynchronize());
      std::vector<float> times;
      for (int rep = 0; rep < 7; ++rep) {
        CHECK(cudaEventRecord(e0));
        launch(kLayers, slabs, v);
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
      std::printf("%d ahead, %d%-4s %9.1f %9.1f %7.1f%% | %7.1f %7.1f %7.1f %7.1f %7.1f\n", slabs,
                  v.loads, v.loads_only ? " mem" : "", us, us / kLayers,
                  100.0 * weight_bytes / bw / 1e3 / us, phase[0] / (kLayers - 1),
                  phase[1] / (kLayers - 1), phase[2] / (kLayers - 1), phase[3] / (kLayers - 1),
                  phase[4] / (kLayers - 1));
      // Attention, from the barrier before it: block 0's scores, values, ticket; kv head 0's
      // merge; the barrier after it.
      std::vector<long long> a(4 * kLayers);
      CHECK(cudaMemcpy(a.data(), attention_trace, a.size() * sizeof(long long),
                       cudaMemcpyDeviceToHost));
      double seg[5] = {};
      for (int l = 1; l < kLayers; ++l) {
        const long long marks[6] = {t[5 * l + 1], a[4 * l],     a[4 * l + 1],
                                    a[4 * l + 2], a[4 * l + 3], t[5 * l + 2]};
        for (int k = 0; k < 5; ++k) seg[k] += (marks[k + 1] - marks[k]) / 1e3 / (kLayers - 1);
      }
      std::printf(
          "    attention: q+scores %.1f, values %.1f, ticket %.1f, merge %.1f, barrier %.1f us\n",
          seg[0], seg[1], seg[2], seg[3], seg[4]);
    }
  }
  return 0;
}
