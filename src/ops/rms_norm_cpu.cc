#include "ops/cpu_norm_rows.h"
#include "ops/rms_norm.h"

namespace inflight {

void rms_norm_cpu(const RmsNormParams& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32, "rms_norm_cpu: f32 only, got {}", dtype_name(p.dtype));
  const auto* weight = static_cast<const float*>(p.weight);
  const int64_t dim = p.dim;
  add_and_normalize_rows_cpu(
      p, [&](const float* x, float* y) { rms_normalize_row(x, y, weight, dim, p.eps); });
}

}  // namespace inflight
