// top_k_logits on CUDA: one block of kThreads per logits row (f32).
//
//   pass 1   every thread folds a strided slice of the row into an online (max, sum of exp,
//            argmax) state; the states merge across the block into log_sum_exp and, for
//            k == 1, the answer (argmax ties to the lowest id).
//   k > 1    radix select of the k-th largest value: the f32 bits map to an unsigned key that
//            orders like the floats; four passes of a 256-bin histogram fix the threshold key
//            one byte at a time (the method of PyTorch's topk). One pass in id order then
//            gathers every entry above the threshold and the lowest-id entries equal to it
//            (warp ballots + a block scan keep the id order), and the k candidates are sorted by
//            rank (k^2 comparisons spread over the block).
// The row is read once for k == 1 and six times otherwise; 256 rows of a 128k vocabulary
// (128 MB) take a fraction of a millisecond; downloading that row set over PCIe would take
// several milliseconds per step.
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 8;
constexpr unsigned kFull = 0xffffffffu;

// Unsigned key with the order of the floats (-0.0 mapped to +0.0 first).
__device__ __forceinline__ uint32_t order_key(float f) {
  if (f == 0.0f) f = 0.0f;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

struct SoftmaxState {
  float m;      // max so far (-inf before any finite entry)
  float s;      // sum of exp(x - m)
  int32_t arg;  // lowest id holding m
};

__device__ __forceinline__ SoftmaxState merge(const SoftmaxState& a, const SoftmaxState& b) {
  SoftmaxState r;
  r.m = fmaxf(a.m, b.m);
  r.arg = a.m > b.m ? a.arg : (b.m > a.m ? b.arg : min(a.arg, b.arg));
  if (r.m == -INFINITY) {
    r.s = 0.0f;
  } else {
    r.s = (a.m == -INFINITY ? 0.0f : a.s * expf(a.m - r.m)) +
          (b.m == -INFINITY ? 0.0f : b.s * expf(b.m - r.m));
  }
  return r;
}

__device__ __forceinline__ SoftmaxState shfl_state(const SoftmaxState& st, int offset) {
  return SoftmaxState{__shfl_xor_sync(kFull, st.m, offset), __shfl_xor_sync(kFull, st.s, offset),
                      __shfl_xor_sync(kFull, st.arg, offset)};
}

__global__ void __launch_bounds__(kThreads) top_k_logits_kernel(TopKLogitsParams p) {
  __shared__ SoftmaxState warp_state[kWarps];
  __shared__ uint32_t hist[256];
  __shared__ uint32_t sh_prefix, sh_kleft;
  __shared__ uint32_t warp_gt[kWarps], warp_eq[kWarps];
  __shared__ int32_t cand_id[kTopKLogitsMax];
  __shared__ float cand_val[kTopKLogitsMax];

  const int64_t row = blockIdx.x;
  const float* x = p.logits + row * p.vocab;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  // ---- pass 1: log-sum-exp and argmax -------------------------------------------------------
  // kUnroll loads in flight per thread before the first is used: a single row (batch 1) is one
  // block, so this pass is latency-bound without them.
  SoftmaxState st{-INFINITY, 0.0f, INT32_MAX};
  for (int64_t base = tid; base < p.vocab; base += kUnroll * kThreads) {
    float v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads;
      v[u] = i < p.vocab ? x[i] : -INFINITY;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads;  // ids grow with u
      if (i >= p.vocab) continue;
      const auto id = static_cast<int32_t>(i);
      if (v[u] > st.m) {
        st.s = (st.m == -INFINITY ? 0.0f : st.s * expf(st.m - v[u])) + 1.0f;
        st.m = v[u];
        st.arg = id;
      } else {
        if (v[u] == st.m && id < st.arg) st.arg = id;
        if (v[u] != -INFINITY) st.s += expf(v[u] - st.m);
      }
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) st = merge(st, shfl_state(st, offset));
  if (lane == 0) warp_state[warp] = st;
  __syncthreads();
  st = warp_state[0];
  for (int w = 1; w < kWarps; ++w) st = merge(st, warp_state[w]);
  if (tid == 0) p.log_sum_exp[row] = st.m == -INFINITY ? -INFINITY : st.m + logf(st.s);
  if (p.k == 1) {
    if (tid == 0) {
      p.top_ids[row] = st.arg;
      p.top_logits[row] = x[st.arg];
    }
    return;
  }

  // ---- radix select of the k-th largest key -------------------------------------------------
  uint32_t prefix = 0, mask = 0, kleft = static_cast<uint32_t>(p.k);
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = tid; b < 256; b += kThreads) hist[b] = 0;
    __syncthreads();
    for (int64_t i = tid; i < p.vocab; i += kThreads) {
      const uint32_t key = order_key(x[i]);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 0xffu], 1u);
    }
    __syncthreads();
    if (warp == 0) {
      // Lane l owns bins 255 - 8l .. 248 - 8l (highest first); a warp scan finds the lane whose
      // bins reach the kleft-th largest key that still matches the prefix.
      uint32_t c[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        c[j] = hist[255 - 8 * lane - j];
        sum += c[j];
      }
      uint32_t incl = sum;
#pragma unroll
      for (int offset = 1; offset < 32; offset *= 2) {
        const uint32_t t = __shfl_up_sync(kFull, incl, offset);
        if (lane >= offset) incl += t;
      }
      uint32_t cum = incl - sum;
      if (cum < kleft && kleft <= incl) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          if (cum + c[j] >= kleft) {
            const uint32_t bin = 255u - 8u * static_cast<uint32_t>(lane) - static_cast<uint32_t>(j);
            sh_prefix = prefix | (bin << shift);
            sh_kleft = kleft - cum;
            break;
          }
          cum += c[j];
        }
      }
    }
    __syncthreads();
    prefix = sh_prefix;
    kleft = sh_kleft;
    mask |= 0xffu << shift;
  }
  // prefix is now the k-th largest key; take every key above it and the kleft lowest-id
  // entries equal to it.
  const uint32_t threshold = prefix;
  const uint32_t n_above = static_cast<uint32_t>(p.k) - kleft;

  // ---- ordered gather -------------------------------------------------------------------------
  const uint32_t lanes_below = (1u << lane) - 1u;
  uint32_t above_base = 0, equal_base = 0;
  for (int64_t base = 0; base < p.vocab; base += kThreads) {
    const int64_t i = base + tid;
    const bool in = i < p.vocab;
    const float v = in ? x[i] : 0.0f;
    const uint32_t key = in ? order_key(v) : 0u;
    const bool above = in && key > threshold;
    const bool equal = in && key == threshold;
    const uint32_t ballot_above = __ballot_sync(kFull, above);
    const uint32_t ballot_equal = __ballot_sync(kFull, equal);
    if (lane == 0) {
      warp_gt[warp] = __popc(ballot_above);
      warp_eq[warp] = __popc(ballot_equal);
    }
    __syncthreads();
    uint32_t off_above = 0, off_equal = 0, total_above = 0, total_equal = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) {
        off_above += warp_gt[w];
        off_equal += warp_eq[w];
      }
      total_above += warp_gt[w];
      total_equal += warp_eq[w];
    }
    if (above) {
      const uint32_t slot = above_base + off_above + __popc(ballot_above & lanes_below);
      cand_id[slot] = static_cast<int32_t>(i);
      cand_val[slot] = v;
    }
    if (equal) {
      const uint32_t r = equal_base + off_equal + __popc(ballot_equal & lanes_below);
      if (r < kleft) {
        cand_id[n_above + r] = static_cast<int32_t>(i);
        cand_val[n_above + r] = v;
      }
    }
    above_base += total_above;
    equal_base += total_equal;
    __syncthreads();  // warp_gt / warp_eq are rewritten next round
    if (above_base == n_above && equal_base >= kleft) break;  // uniform across the block
  }

  // ---- rank sort: best first, equal values by lower id ----------------------------------------
  for (int c = tid; c < p.k; c += kThreads) {
    const float v = cand_val[c];
    const int32_t id = cand_id[c];
    int rank = 0;
    for (int j = 0; j < p.k; ++j) {
      const float vj = cand_val[j];
      rank += (vj > v || (vj == v && cand_id[j] < id)) ? 1 : 0;
    }
    p.top_ids[row * p.k + rank] = id;
    p.top_logits[row * p.k + rank] = v;
  }
}

}  // namespace

void top_k_logits_cuda(const TopKLogitsParams& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  INFLIGHT_CHECK(
      p.rows <= cuda::kMaxGridX && p.vocab <= INT32_MAX && p.k >= 1 && p.k <= kTopKLogitsMax,
      "top_k_logits_cuda: {} rows x {} vocab, k {} out of range", p.rows, p.vocab, p.k);
  top_k_logits_kernel<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
