#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "ops/cpu_dot.h"
#include "ops/moe_experts.h"

namespace inflight {

void moe_experts_cpu(const MoeExpertsParams& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32, "moe_experts_cpu: f32 only, got {}", dtype_name(p.dtype));
  const int64_t hidden = p.hidden, inter = p.inter, k = p.k;
  const auto* x = static_cast<const float*>(p.x);
  const auto* gate_up_w = static_cast<const float*>(p.gate_up_w);
  const auto* down_w = static_cast<const float*>(p.down_w);
  auto* gate_up = static_cast<float*>(p.gate_up);
  auto* act = static_cast<float*>(p.act);
  auto* expert_out = static_cast<float*>(p.expert_out);
  auto* out = static_cast<float*>(p.out);
  for (int64_t i = 0; i < p.pairs(); ++i) {
    INFLIGHT_CHECK(p.ids[i] >= 0 && p.ids[i] < p.num_experts,
                   "moe_experts_cpu: pair {} routed to expert {} of {}", i, p.ids[i],
                   p.num_experts);
  }
  // Pair p = t k + j: its expert's MLP on x[t], in rows p of the workspace.
  ThreadPool::global().parallel_for(
      p.pairs(),
      [&](int64_t begin, int64_t end) {
        for (int64_t pair = begin; pair < end; ++pair) {
          const int64_t e = p.ids[pair];
          const float* xt = x + pair / k * hidden;
          const float* w1 = gate_up_w + e * 2 * inter * hidden;
          float* h = gate_up + pair * 2 * inter;
          for (int64_t r = 0; r < 2 * inter; ++r) h[r] = dot(w1 + r * hidden, xt, hidden);
          float* a = act + pair * inter;
          for (int64_t i = 0; i < inter; ++i) {
            const float g = h[i];
            a[i] = g / (1.0f + std::exp(-g)) * h[inter + i];
          }
          const float* w2 = down_w + e * hidden * inter;
          float* y = expert_out + pair * hidden;
          for (int64_t r = 0; r < hidden; ++r) y[r] = dot(w2 + r * inter, a, inter);
        }
      },
      /*min_chunk=*/1);
  // The weighted sum over each token's pairs, in choice order.
  ThreadPool::global().parallel_for(
      p.tokens,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          float* o = out + t * hidden;
          std::fill(o, o + hidden, 0.0f);
          for (int64_t j = 0; j < k; ++j) {
            const float w = p.weights[t * k + j];
            const float* y = expert_out + (t * k + j) * hidden;
            for (int64_t c = 0; c < hidden; ++c) o[c] += w * y[c];
          }
        }
      },
      /*min_chunk=*/std::max<int64_t>(1, 4096 / std::max<int64_t>(1, hidden)));
}

}  // namespace inflight
