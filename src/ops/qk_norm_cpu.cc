#include "core/thread_pool.h"
#include "ops/cpu_norm_rows.h"
#include "ops/qk_norm.h"

namespace inflight {

void qk_norm_cpu(const QkNormParams& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32, "qk_norm_cpu: f32 only, got {}", dtype_name(p.dtype));
  auto* qkv = static_cast<float*>(p.qkv);
  const auto* q_weight = static_cast<const float*>(p.q_weight);
  const auto* k_weight = static_cast<const float*>(p.k_weight);
  const int64_t d = p.head_dim, normed = p.num_heads + p.num_kv_heads;
  const int64_t row = (p.num_heads + 2 * p.num_kv_heads) * d;
  // One item per (token, normalised head): q heads first, then k heads, as stored.
  ThreadPool::global().parallel_for(
      p.tokens * normed,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const int64_t t = i / normed, h = i % normed;
          float* x = qkv + t * row + h * d;
          rms_normalize_row(x, x, h < p.num_heads ? q_weight : k_weight, d, p.eps);
        }
      },
      /*min_chunk=*/std::max<int64_t>(1, 4096 / std::max<int64_t>(1, d)));
}

}  // namespace inflight
