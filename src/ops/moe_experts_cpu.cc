#include <algorithm>
#include <cmath>
#include <vector>

#include "core/fp8.h"
#include "core/thread_pool.h"
#include "ops/cpu_dot.h"
#include "ops/moe_experts.h"

namespace inflight {

namespace {

// Row `row` of the stacked expert weight [E n, cols]: f32 as stored, or e4m3 dequantized into
// `buffer` (value * scale, rounded once to f32).
const float* weight_row(const void* w, const MoeWeightScales& scales, bool fp8, int64_t row,
                        int64_t cols, std::vector<float>& buffer) {
  if (!fp8) return static_cast<const float*>(w) + row * cols;
  const auto* q = static_cast<const uint8_t*>(w) + row * cols;
  const float* s = scales.s + row / scales.rows_per * scales.stride;
  buffer.resize(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) {
    buffer[static_cast<size_t>(c)] =
        e4m3_to_f32(q[c]) * s[scales.cols_per > 0 ? c / scales.cols_per : 0];
  }
  return buffer.data();
}

}  // namespace

void moe_experts_cpu(const MoeExpertsParams& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32, "moe_experts_cpu: f32 only, got {}", dtype_name(p.dtype));
  const int64_t hidden = p.hidden, inter = p.inter, k = p.k;
  const auto* x = static_cast<const float*>(p.x);
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
        std::vector<float> row;  // a dequantized e4m3 weight row
        for (int64_t pair = begin; pair < end; ++pair) {
          const int64_t e = p.ids[pair];
          const float* xt = x + pair / k * hidden;
          float* h = gate_up + pair * 2 * inter;
          for (int64_t r = 0; r < 2 * inter; ++r) {
            const int64_t w_row = e * 2 * inter + r;
            h[r] = dot(weight_row(p.gate_up_w, p.gate_up_scales, p.fp8_weights, w_row, hidden, row),
                       xt, hidden);
          }
          float* a = act + pair * inter;
          for (int64_t i = 0; i < inter; ++i) {
            const float g = h[i];
            a[i] = g / (1.0f + std::exp(-g)) * h[inter + i];
          }
          float* y = expert_out + pair * hidden;
          for (int64_t r = 0; r < hidden; ++r) {
            const int64_t w_row = e * hidden + r;
            y[r] = dot(weight_row(p.down_w, p.down_scales, p.fp8_weights, w_row, inter, row), a,
                       inter);
          }
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
