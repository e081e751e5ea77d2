#include <cmath>

#include "ops/cpu_norm_rows.h"
#include "ops/rms_norm.h"

namespace inflight {

void rms_norm_cpu(const RmsNormParams& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32, "rms_norm_cpu: f32 only, got {}", dtype_name(p.dtype));
  const auto* weight = static_cast<const float*>(p.weight);
  const int64_t dim = p.dim;
  add_and_normalize_rows_cpu(p, [&](const float* x, float* y) {
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
    const float inv_rms =
        static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + p.eps));
    for (int64_t i = 0; i < dim; ++i) y[i] = x[i] * inv_rms * weight[i];
  });
}

}  // namespace inflight
