#include <cmath>
#include <numbers>

#include "core/thread_pool.h"
#include "ops/gelu.h"

namespace inflight {

void gelu_cpu(const GeluParams& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32, "gelu_cpu: f32 only, got {}", dtype_name(p.dtype));
  const auto* x = static_cast<const float*>(p.x);
  auto* out = static_cast<float*>(p.out);
  constexpr auto kInvSqrt2 = static_cast<float>(1.0 / std::numbers::sqrt2);
  ThreadPool::global().parallel_for(
      p.numel,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          out[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
        }
      },
      /*min_chunk=*/16384);
}

}  // namespace inflight
