// top_k_logits on CUDA: blocks of kThreads over f32 logits rows [rows, vocab].
//
// Two paths, one kernel; the launcher picks `chunks`, the blocks per row (grid rows * chunks,
// block b works on row b / chunks, chunk b % chunks):
//  - chunks == 1 (many rows: they fill the GPU by themselves): one block per row.
//  - chunks >= 2 (few rows: one block per row leaves most SMs idle and walks 128k ids in ~30
//    dependent rounds of loads): chunk c of a row is ids [c * V / chunks, (c + 1) * V / chunks).
//    Each chunk block writes its softmax state and, for k > 1, the k best of its chunk (every
//    chunk holds at least k ids) to the workspace; the block that finishes a row last (a
//    per-row counter) merges the row: states -> log-sum-exp (and the argmax for k == 1), the
//    chunks * k candidates -> the top k. The top k of a row lies in the union of its chunks'
//    top k, so the merge is exact.
//
// Per block, over a list of entries (a row in global memory, a chunk staged in shared memory,
// or a row's candidates):
//   fold     every thread folds a strided slice into an online (max, sum of exp, argmax)
//            state; the states merge across the block (argmax ties to the lowest id).
//   select   radix select of the k-th largest value: the f32 bits map to an unsigned key that
//            orders like the floats; four passes of a 256-bin histogram fix the threshold key
//            one byte at a time (the method of PyTorch's topk). One pass in list order then
//            gathers every entry above the threshold and the first entries equal to it (warp
//            ballots + a block scan keep the list order). Every list holds equal values in
//            increasing id order (a row or chunk by construction; candidates chunk after chunk,
//            each chunk's gathered in id order within "above" and within "equal"), so the first
//            equal entries are the lowest ids.
//   sort     the k final candidates are sorted by rank (k^2 comparisons spread over the block);
//            chunk candidates stay unsorted.
// The one-block path reads its row once for k == 1 and six times otherwise; a chunk block reads
// its chunk from memory once (into shared memory for k > 1).
#include <algorithm>
#include <cmath>

#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 8;
constexpr unsigned kFull = 0xffffffffu;

// Split path limits (the launcher checks them, the kernel assumes them):
//   rows * chunks <= kMaxSplitBlocks      workspace slots (kTopKLogitsCudaWorkspaceBytes)
//   V / chunks >= k                       every chunk yields k candidates
//   k > 1: ceil(V / chunks) <= kListMax   a chunk fits the shared list
//          chunks * k <= kListMax         so do a row's candidates
constexpr int64_t kMaxSplitBlocks = 1024;
constexpr int64_t kListMax = 8192;  // entries; ids + values: 64 KiB of dynamic shared memory
constexpr int64_t kListBytes = kListMax * (sizeof(float) + sizeof(int32_t));
// A chunk has at least one id per thread when the launcher picks.
constexpr int64_t kMinChunk = kThreads;
// Blocks the picked split aims at per SM: two 512-thread blocks are resident at once.
constexpr int64_t kSplitBlocksPerSm = 2;

// Unsigned key with the order of the floats (-0.0 mapped to +0.0 first).
__device__ __forceinline__ uint32_t order_key(float f) {
  if (f == 0.0f) f = 0.0f;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

struct SoftmaxState {
  float m;      // max so far (-inf before any finite entry)
  float s;      // sum of exp(x - m)
  int32_t arg;  // lowest id holding m (INT32_MAX before any entry)
};

// The workspace, carved from kTopKLogitsCudaWorkspaceBytes.
struct SplitWorkspace {
  uint32_t* counters;    // [kMaxSplitBlocks] per row: chunks done; 0 between launches
  SoftmaxState* states;  // [kMaxSplitBlocks] per (row, chunk)
  int32_t* cand_id;      // [kMaxSplitBlocks, k] per (row, chunk): its k best, unsorted
  float* cand_val;       // [kMaxSplitBlocks, k]
};
static_assert(sizeof(SoftmaxState) == 12);
static_assert(kTopKLogitsCudaWorkspaceBytes ==
              kMaxSplitBlocks * (sizeof(uint32_t) + sizeof(SoftmaxState) +
                                 kTopKLogitsMax * (sizeof(int32_t) + sizeof(float))));

struct SelectShared {
  SoftmaxState warp_state[kWarps];
  uint32_t hist[256];
  uint32_t prefix, kleft;
  uint32_t warp_count[kWarps];
  int32_t cand_id[kTopKLogitsMax];
  float cand_val[kTopKLogitsMax];
  int last;  // split: this block is the last of its row
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

__device__ __forceinline__ float log_sum_exp(const SoftmaxState& st) {
  return st.m == -INFINITY ? -INFINITY : st.m + logf(st.s);
}

// This thread's state over ids begin + tid, begin + tid + kThreads, ... < end of row x; copies
// x[i] to stash[i - begin] when stash is set. kUnroll loads are in flight before the first is
// used: the pass is latency-bound.
__device__ __forceinline__ SoftmaxState fold(const float* x, int64_t begin, int64_t end,
                                             float* stash) {
  SoftmaxState st{-INFINITY, 0.0f, INT32_MAX};
  for (int64_t base = begin + threadIdx.x; base < end; base += kUnroll * kThreads) {
    float v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads;
      v[u] = i < end ? x[i] : -INFINITY;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads;  // ids grow with u
      if (i >= end) continue;
      if (stash != nullptr) stash[i - begin] = v[u];
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
  return st;
}

// The merge of every thread's state in a fixed order, for every thread. Every thread must call
// it; it passes two barriers, so shared memory written before the call is visible after it.
__device__ __forceinline__ SoftmaxState block_merge(SoftmaxState st, SelectShared& sh) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) st = merge(st, shfl_state(st, offset));
  __syncthreads();  // an earlier call may still be reading warp_state
  if (lane == 0) sh.warp_state[warp] = st;
  __syncthreads();
  st = sh.warp_state[0];
  for (int w = 1; w < kWarps; ++w) st = merge(st, sh.warp_state[w]);
  return st;
}

// The k-th largest key of vals[0, n) (k <= n); kleft gets how many entries equal to it belong to
// the top k (the other k - kleft are above it).
__device__ __forceinline__ uint32_t radix_select(const float* vals, int64_t n, int32_t k,
                                                 SelectShared& sh, uint32_t& kleft) {
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  uint32_t prefix = 0, mask = 0;
  kleft = static_cast<uint32_t>(k);
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = tid; b < 256; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    for (int64_t i = tid; i < n; i += kThreads) {
      const uint32_t key = order_key(vals[i]);
      if ((key & mask) == prefix) atomicAdd(&sh.hist[(key >> shift) & 0xffu], 1u);
    }
    __syncthreads();
    if (warp == 0) {
      // Lane l owns bins 255 - 8l .. 248 - 8l (highest first); a warp scan finds the lane whose
      // bins reach the kleft-th largest key that still matches the prefix.
      uint32_t c[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        c[j] = sh.hist[255 - 8 * lane - j];
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
            sh.prefix = prefix | (bin << shift);
            sh.kleft = kleft - cum;
            break;
          }
          cum += c[j];
        }
      }
    }
    __syncthreads();
    prefix = sh.prefix;
    kleft = sh.kleft;
    mask |= 0xffu << shift;
  }
  return prefix;
}

// Ranks of two flags over the block in thread order, packed (a in bits 0..15, b in 16..31): the
// return value holds this thread's exclusive ranks, total the block's counts. Every thread must
// call it; it ends with a barrier.
__device__ __forceinline__ uint32_t block_ranks(bool a, bool b, SelectShared& sh, uint32_t& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const uint32_t ballot_a = __ballot_sync(kFull, a), ballot_b = __ballot_sync(kFull, b);
  const uint32_t lanes_below = (1u << lane) - 1u;
  if (lane == 0) sh.warp_count[warp] = __popc(ballot_a) | (__popc(ballot_b) << 16);
  __syncthreads();
  uint32_t offset = 0;
  total = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const uint32_t c = sh.warp_count[w];
    if (w < warp) offset += c;
    total += c;
  }
  __syncthreads();  // warp_count is rewritten by the next call
  return offset + (__popc(ballot_a & lanes_below) | (__popc(ballot_b & lanes_below) << 16));
}

// The top k of the list (vals[i], id ids[i], or id_base + i without ids), unsorted, into
// dst[0, k): the entries above `threshold` in list order, then the first kleft equal to it.
// Ends with a barrier (dst may be shared).
__device__ __forceinline__ void gather(const float* vals, const int32_t* ids, int64_t id_base,
                                       int64_t n, uint32_t threshold, uint32_t kleft, int32_t k,
                                       SelectShared& sh, int32_t* dst_id, float* dst_val) {
  const uint32_t n_above = static_cast<uint32_t>(k) - kleft;
  uint32_t above_base = 0, equal_base = 0;
  for (int64_t base = 0; base < n; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    const bool in = i < n;
    const float v = in ? vals[i] : 0.0f;
    const uint32_t key = in ? order_key(v) : 0u;
    const bool above = in && key > threshold;
    const bool equal = in && key == threshold;
    uint32_t total;
    const uint32_t rank = block_ranks(above, equal, sh, total);
    if (above) {
      const uint32_t slot = above_base + (rank & 0xffffu);
      dst_id[slot] = ids != nullptr ? ids[i] : static_cast<int32_t>(id_base + i);
      dst_val[slot] = v;
    }
    if (equal) {
      const uint32_t r = equal_base + (rank >> 16);
      if (r < kleft) {
        dst_id[n_above + r] = ids != nullptr ? ids[i] : static_cast<int32_t>(id_base + i);
        dst_val[n_above + r] = v;
      }
    }
    above_base += total & 0xffffu;
    equal_base += total >> 16;
    if (above_base == n_above && equal_base >= kleft) break;  // uniform across the block
  }
  __syncthreads();
}

// The k best entries of the list, best first, equal values by lower id, into out_id / out_val.
__device__ __forceinline__ void select_sorted(const float* vals, const int32_t* ids, int64_t n,
                                              int32_t k, SelectShared& sh, int32_t* out_id,
                                              float* out_val) {
  uint32_t kleft;
  const uint32_t threshold = radix_select(vals, n, k, sh, kleft);
  gather(vals, ids, 0, n, threshold, kleft, k, sh, sh.cand_id, sh.cand_val);
  for (int c = threadIdx.x; c < k; c += kThreads) {
    const float v = sh.cand_val[c];
    const int32_t id = sh.cand_id[c];
    int rank = 0;
    for (int j = 0; j < k; ++j) {
      const float vj = sh.cand_val[j];
      rank += (vj > v || (vj == v && sh.cand_id[j] < id)) ? 1 : 0;
    }
    out_id[rank] = id;
    out_val[rank] = v;
  }
}

__global__ void __launch_bounds__(kThreads, kSplitBlocksPerSm)
    top_k_logits_kernel(TopKLogitsParams p, SplitWorkspace ws, int32_t chunks) {
  __shared__ SelectShared sh;
  // Split path with k > 1: [max(chunk length, 2 * chunks * k)] f32 / i32 words.
  extern __shared__ float list[];

  const int64_t row = blockIdx.x / chunks;
  const int32_t chunk = static_cast<int32_t>(blockIdx.x % chunks);
  const int32_t k = p.k;
  const float* x = p.logits + row * p.vocab;
  int32_t* out_id = p.top_ids + row * k;
  float* out_val = p.top_logits + row * k;
  const int tid = threadIdx.x;

  if (chunks == 1) {
    const SoftmaxState st = block_merge(fold(x, 0, p.vocab, nullptr), sh);
    if (tid == 0) p.log_sum_exp[row] = log_sum_exp(st);
    if (k == 1) {
      if (tid == 0) {
        out_id[0] = st.arg;
        out_val[0] = x[st.arg];
      }
      return;
    }
    select_sorted(x, nullptr, p.vocab, k, sh, out_id, out_val);
    return;
  }

  // ---- split: this block's chunk [begin, end), at least k ids --------------------------------
  const int64_t begin = chunk * p.vocab / chunks, end = (chunk + 1) * p.vocab / chunks;
  const int64_t slot = row * chunks + chunk;
  // For k > 1 the chunk is staged in list[0, end - begin): complete after block_merge.
  const SoftmaxState st = block_merge(fold(x, begin, end, k > 1 ? list : nullptr), sh);
  if (tid == 0) ws.states[slot] = st;
  if (k > 1) {
    uint32_t kleft;
    const uint32_t threshold = radix_select(list, end - begin, k, sh, kleft);
    gather(list, nullptr, begin, end - begin, threshold, kleft, k, sh, ws.cand_id + slot * k,
           ws.cand_val + slot * k);
  }
  // Publish: every thread fences its own workspace writes before thread 0 counts the block.
  __threadfence();
  __syncthreads();
  if (tid == 0) sh.last = atomicAdd(ws.counters + row, 1u) == static_cast<uint32_t>(chunks - 1);
  __syncthreads();
  if (!sh.last) return;
  __threadfence();
  if (tid == 0) ws.counters[row] = 0;  // ready for the next launch

  // ---- the row's last block: merge its chunks (workspace reads bypass L1: __ldcg) ------------
  SoftmaxState merged{-INFINITY, 0.0f, INT32_MAX};
  for (int64_t c = tid; c < chunks; c += kThreads) {
    const SoftmaxState* s = ws.states + row * chunks + c;
    merged = merge(merged, SoftmaxState{__ldcg(&s->m), __ldcg(&s->s), __ldcg(&s->arg)});
  }
  merged = block_merge(merged, sh);
  if (tid == 0) p.log_sum_exp[row] = log_sum_exp(merged);
  if (k == 1) {
    if (tid == 0) {
      out_id[0] = merged.arg;
      out_val[0] = x[merged.arg];
    }
    return;
  }
  // The row's candidates [chunks * k], chunk after chunk, into the shared list.
  const int64_t n = static_cast<int64_t>(chunks) * k;
  const int32_t* src_id = ws.cand_id + row * n;
  const float* src_val = ws.cand_val + row * n;
  auto* list_id = reinterpret_cast<int32_t*>(list + n);
  for (int64_t base = tid; base < n; base += kUnroll * kThreads) {
    float v[kUnroll];
    int32_t id[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads;
      if (i < n) {
        v[u] = __ldcg(src_val + i);
        id[u] = __ldcg(src_id + i);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads;
      if (i < n) {
        list[i] = v[u];
        list_id[i] = id[u];
      }
    }
  }
  __syncthreads();
  select_sorted(list, list_id, n, k, sh, out_id, out_val);
}

SplitWorkspace carve(void* workspace) {
  auto* bytes = static_cast<char*>(workspace);
  SplitWorkspace ws;
  ws.counters = reinterpret_cast<uint32_t*>(bytes);
  bytes += kMaxSplitBlocks * sizeof(uint32_t);
  ws.states = reinterpret_cast<SoftmaxState*>(bytes);
  bytes += kMaxSplitBlocks * sizeof(SoftmaxState);
  ws.cand_id = reinterpret_cast<int32_t*>(bytes);
  bytes += kMaxSplitBlocks * kTopKLogitsMax * sizeof(int32_t);
  ws.cand_val = reinterpret_cast<float*>(bytes);
  return ws;
}

// The current device's SM count; lets the kernel take kListBytes of dynamic shared memory there.
int64_t prepare_device() {
  cuda::allow_dynamic_smem<top_k_logits_kernel, static_cast<int>(kListBytes)>();
  return cuda::num_sms();
}

bool split_ok(int64_t rows, int64_t vocab, int32_t k, int64_t chunks) {
  if (chunks < 2 || rows * chunks > kMaxSplitBlocks || vocab / chunks < k) return false;
  return k == 1 || ((vocab + chunks - 1) / chunks <= kListMax && chunks * k <= kListMax);
}

}  // namespace

int32_t top_k_logits_cuda_chunks(int64_t rows, int64_t vocab, int32_t k) {
  // Blocks resident at once; beyond half of them the rows alone fill the GPU.
  const int64_t resident = kSplitBlocksPerSm * prepare_device();
  if (rows < 1 || rows > resident / 2) return 1;
  int64_t chunks =
      std::min({resident / rows, kMaxSplitBlocks / rows, vocab / kMinChunk, vocab / k});
  if (k > 1) {
    // The critical path is a chunk (V / chunks entries) and then the merge (chunks * k entries):
    // balanced at chunks = sqrt(V / k), ~22 for 128k ids and k = 256, ~50 for k = 50. At least
    // the chunks whose ids fit the shared list, even past one wave of resident blocks: a second
    // wave of short blocks still beats one long block per row.
    const int64_t lo = (vocab + kListMax - 1) / kListMax;
    const int64_t hi = std::max(lo, std::min(chunks, kListMax / k));
    const auto balanced = std::lround(std::sqrt(static_cast<double>(vocab) / k));
    chunks = std::clamp(static_cast<int64_t>(balanced), lo, hi);
  }
  return split_ok(rows, vocab, k, chunks) ? static_cast<int32_t>(chunks) : 1;
}

void top_k_logits_cuda(const TopKLogitsParams& p, void* workspace, cudaStream_t stream,
                       int32_t chunks) {
  if (p.rows == 0) return;
  INFLIGHT_CHECK(p.vocab <= INT32_MAX && p.k >= 1 && p.k <= kTopKLogitsMax && p.k <= p.vocab,
                 "top_k_logits_cuda: {} rows x {} vocab, k {} out of range", p.rows, p.vocab, p.k);
  if (chunks == 0)
    chunks = workspace != nullptr ? top_k_logits_cuda_chunks(p.rows, p.vocab, p.k) : 1;
  INFLIGHT_CHECK(chunks == 1 || (workspace != nullptr && split_ok(p.rows, p.vocab, p.k, chunks)),
                 "top_k_logits_cuda: {} chunks per row do not fit {} rows x {} vocab, k {}{}",
                 chunks, p.rows, p.vocab, p.k, workspace == nullptr ? " (no workspace)" : "");
  INFLIGHT_CHECK(p.rows * chunks <= cuda::kMaxGridX, "top_k_logits_cuda: {} rows out of range",
                 p.rows);
  size_t smem = 0;
  if (chunks > 1 && p.k > 1) {
    const int64_t words = std::max((p.vocab + chunks - 1) / chunks, int64_t{2} * chunks * p.k);
    smem = static_cast<size_t>(words) * sizeof(float);
    prepare_device();  // the attribute that allows smem > 48 KiB
  }
  const SplitWorkspace ws = workspace != nullptr ? carve(workspace) : SplitWorkspace{};
  top_k_logits_kernel<<<static_cast<unsigned>(p.rows * chunks), kThreads, smem, stream>>>(p, ws,
                                                                                          chunks);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
