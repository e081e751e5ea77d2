// moe_route: the router of a mixture-of-experts MLP (Mixtral, Qwen3-MoE). Per token, the
// softmax over the experts' router logits, the k most probable experts, and their weights:
//
//   p[t, :]       = softmax(logits[t, :])                        logits [T, E] f32
//   ids[t, 0..k)  = the k largest p[t, e], best first; ties go to the lower expert id
//   weights[t, j] = p[t, ids[t, j]]          (/ sum_j p[t, ids[t, j]] when renormalize)
//
// Experts are ranked by their logits (the softmax is monotone), so ids are exact whatever the
// rounding of the probabilities; a NaN logit ranks as -inf, so every id is a valid expert.
// Mixtral always renormalises; Qwen3-MoE does when its config sets norm_topk_prob.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "runtime/moe_workspace.h"  // kMoeMaxExperts, kMoeMaxTopK

namespace inflight {

struct MoeRouteParams {
  const float* logits = nullptr;  // [tokens, num_experts]
  int32_t* ids = nullptr;         // [tokens, k]
  float* weights = nullptr;       // [tokens, k]
  int64_t tokens = 0;
  int64_t num_experts = 0;
  int32_t k = 0;
  bool renormalize = true;
};

// Validates logits [T, E] f32, ids [T, k] i32 and weights [T, k] f32 on one device, with
// 1 <= k <= E <= kMoeMaxExperts and k <= kMoeMaxTopK.
MoeRouteParams make_moe_route_params(const Tensor& logits, int32_t k, bool renormalize,
                                     const Tensor& ids, const Tensor& weights);

void moe_route_cpu(const MoeRouteParams& p);

}  // namespace inflight
