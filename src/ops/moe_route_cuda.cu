// moe_route on CUDA: one warp per token. Each lane keeps the logits of experts lane, lane + 32,
// ... in registers (E <= kMoeMaxExperts = 32 x 32); the softmax's max and sum are warp
// reductions, and each of the k choices is one warp argmax over the experts not chosen yet,
// ordered by (logit, lower id) exactly as the CPU reference orders them. The winner's logit
// travels with it through the reduction, and lane j keeps choice j (k <= 32), so nothing is
// read back from memory between the choices: a token's route is a few dependent steps, not k
// round trips to memory.
#include <cmath>

#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kPerLane = static_cast<int>(kMoeMaxExperts / 32);

// The rank of a logit: NaN ranks as -inf.
__device__ __forceinline__ float rank_key(float v) {
  return isnan(v) ? -INFINITY : v;
}

// Whether (v, id) ranks before (best_v, best_id): larger value, then lower id.
__device__ __forceinline__ bool ranks_before(float v, int id, float best_v, int best_id) {
  return v > best_v || (v == best_v && id < best_id);
}

__global__ void __launch_bounds__(kWarpsPerBlock * 32) moe_route_kernel(MoeRouteParams p) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (t >= p.tokens) return;
  const int lane = threadIdx.x % 32;
  const int num_experts = static_cast<int>(p.num_experts);
  const float* logits = p.logits + t * p.num_experts;
  float v[kPerLane];
  float max_key = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + 32 * i;
    v[i] = e < num_experts ? logits[e] : -INFINITY;
    max_key = fmaxf(max_key, rank_key(v[i]));
    if (32 * (i + 1) >= num_experts) break;
  }
  max_key = cuda::warp_max(max_key);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    if (lane + 32 * i < num_experts) sum += expf(v[i] - max_key);
    if (32 * (i + 1) >= num_experts) break;
  }
  sum = cuda::warp_sum(sum);

  uint32_t chosen = 0;  // bit i: expert lane + 32 i is taken
  float chosen_sum = 0.0f;
  int my_id = 0;  // lane j < k: choice j
  float my_prob = 0.0f;
  for (int j = 0; j < p.k; ++j) {
    float best_v = -INFINITY, best_raw = -INFINITY;  // rank key and logit as stored
    int best_id = INT_MAX;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < num_experts && !((chosen >> i) & 1u) &&
          ranks_before(rank_key(v[i]), e, best_v, best_id)) {
        best_v = rank_key(v[i]);
        best_raw = v[i];
        best_id = e;
      }
      if (32 * (i + 1) >= num_experts) break;
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other_v = __shfl_xor_sync(0xffffffffu, best_v, offset);
      const float other_raw = __shfl_xor_sync(0xffffffffu, best_raw, offset);
      const int other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
      if (ranks_before(other_v, other_id, best_v, best_id)) {
        best_v = other_v;
        best_raw = other_raw;
        best_id = other_id;
      }
    }
    if (best_id % 32 == lane) chosen |= 1u << (best_id / 32);
    const float prob = expf(best_raw - max_key) / sum;
    chosen_sum += prob;
    if (lane == j) {
      my_id = best_id;
      my_prob = prob;
    }
  }
  if (lane < p.k) {
    p.ids[t * p.k + lane] = my_id;
    p.weights[t * p.k + lane] = p.renormalize ? my_prob / chosen_sum : my_prob;
  }
}

}  // namespace

void moe_route_cuda(const MoeRouteParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return;
  const int64_t blocks = (p.tokens + kWarpsPerBlock - 1) / kWarpsPerBlock;
  INFLIGHT_CHECK(blocks <= cuda::kMaxGridX, "moe_route_cuda: {} tokens exceed the grid", p.tokens);
  moe_route_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, stream>>>(p);
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
