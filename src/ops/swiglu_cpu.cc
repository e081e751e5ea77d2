#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "ops/swiglu.h"

namespace inflight {

void swiglu_cpu(const SwigluParams& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32, "swiglu_cpu: f32 only, got {}", dtype_name(p.dtype));
  const auto* gate_up = static_cast<const float*>(p.gate_up);
  auto* out = static_cast<float*>(p.out);
  const int64_t inter = p.inter;
  ThreadPool::global().parallel_for(
      p.rows,
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const float* gate = gate_up + r * 2 * inter;
          const float* up = gate + inter;
          float* y = out + r * inter;
          for (int64_t i = 0; i < inter; ++i) {
            const float g = gate[i];
            y[i] = g / (1.0f + std::exp(-g)) * up[i];
          }
        }
      },
      /*min_chunk=*/std::max<int64_t>(1, 4096 / std::max<int64_t>(1, inter)));
}

}  // namespace inflight
