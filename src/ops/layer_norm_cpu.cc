#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "ops/layer_norm.h"

namespace inflight {

void layer_norm_cpu(const LayerNormParams& lp) {
  const RmsNormParams& p = lp.norm;
  INFLIGHT_CHECK(p.dtype == DType::kF32, "layer_norm_cpu: f32 only, got {}", dtype_name(p.dtype));
  const auto* add = static_cast<const float*>(p.add);
  auto* residual = static_cast<float*>(p.residual);
  const auto* weight = static_cast<const float*>(p.weight);
  const auto* bias = static_cast<const float*>(lp.bias);
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
          double sum = 0.0;
          for (int64_t i = 0; i < dim; ++i) sum += x[i];
          const double mean = sum / static_cast<double>(dim);
          double sum_sq = 0.0;
          for (int64_t i = 0; i < dim; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
          const auto inv_std =
              static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + p.eps));
          const auto m = static_cast<float>(mean);
          float* y = out + r * dim;
          for (int64_t i = 0; i < dim; ++i) {
            y[i] = (x[i] - m) * inv_std * weight[i] + (bias != nullptr ? bias[i] : 0.0f);
          }
        }
      },
      /*min_chunk=*/std::max<int64_t>(1, 8192 / std::max<int64_t>(1, dim)));
}

}  // namespace inflight
