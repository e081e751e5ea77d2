#include <algorithm>

#include "core/thread_pool.h"
#include "ops/clamp.h"

namespace inflight {

void clamp_cpu(const ClampParams& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32, "clamp_cpu: f32 only, got {}", dtype_name(p.dtype));
  auto* x = static_cast<float*>(p.x);
  ThreadPool::global().parallel_for(
      p.numel,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) x[i] = std::clamp(x[i], -p.limit, p.limit);
      },
      /*min_chunk=*/16384);
}

}  // namespace inflight
