#include "core/thread_pool.h"
#include "ops/fill_random.h"

namespace inflight {

void fill_random_cpu(const FillRandomParams& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32, "fill_random_cpu: f32 only, got {}", dtype_name(p.dtype));
  auto* out = static_cast<float*>(p.data);
  ThreadPool::global().parallel_for(
      p.numel,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] = fill_random_value(p, i);
      },
      /*min_chunk=*/int64_t{1} << 16);
}

}  // namespace inflight
