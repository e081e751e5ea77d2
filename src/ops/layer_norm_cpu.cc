#include <cmath>

#include "ops/cpu_norm_rows.h"
#include "ops/layer_norm.h"

namespace inflight {

void layer_norm_cpu(const LayerNormParams& lp) {
  const RmsNormParams& p = lp.norm;
  INFLIGHT_CHECK(p.dtype == DType::kF32, "layer_norm_cpu: f32 only, got {}", dtype_name(p.dtype));
  const auto* weight = static_cast<const float*>(p.weight);
  const auto* bias = static_cast<const float*>(lp.bias);
  const int64_t dim = p.dim;
  add_and_normalize_rows_cpu(p, [&](const float* x, float* y) {
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += x[i];
    const double mean = sum / static_cast<double>(dim);
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
    const auto inv_std =
        static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + p.eps));
    const auto m = static_cast<float>(mean);
    for (int64_t i = 0; i < dim; ++i) {
      y[i] = (x[i] - m) * inv_std * weight[i] + (bias != nullptr ? bias[i] : 0.0f);
    }
  });
}

}  // namespace inflight
