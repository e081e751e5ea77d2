#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "ops/rms_norm.h"

namespace inflight {

void rms_norm_cpu(const RmsNormParams& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32, "rms_norm_cpu: f32 only, got {}", dtype_name(p.dtype));
  const auto* add = static_cast<const float*>(p.add);
  auto* residual = static_cast<float*>(p.residual);
  const auto* weight = static_cast<const float*>(p.weight);
  auto* out = static_cast<float*>(p.out);
  const int64_t dim = p.dim;
  ThreadPool::global().parallel_for(
      p.rows,
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          float* x = residual + r * dim;
          if (add != nullptr) {
            const float* a = add + r * dim;
            for (int64_t i = 0; i < dim; ++i) x[i] += a[i];
          }
          double sum_sq = 0.0;
          for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
          const float inv_rms =
              static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + p.eps));
          float* y = out + r * dim;
          for (int64_t i = 0; i < dim; ++i) y[i] = x[i] * inv_rms * weight[i];
        }
      },
      /*min_chunk=*/std::max<int64_t>(1, 8192 / std::max<int64_t>(1, dim)));
}

}  // namespace inflight
