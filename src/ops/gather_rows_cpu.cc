#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "ops/gather_rows.h"

namespace inflight {

void gather_rows_cpu(const GatherRowsParams& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32, "gather_rows_cpu: f32 only, got {}", dtype_name(p.dtype));
  const auto* src = static_cast<const float*>(p.src);
  auto* dst = static_cast<float*>(p.dst);
  const size_t row_bytes = static_cast<size_t>(p.cols) * sizeof(float);
  ThreadPool::global().parallel_for(
      p.num_rows,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const int64_t r = static_cast<int64_t>(p.indices[i]) - p.first_index;
          if (r < 0 || r >= p.src_rows) {
            std::memset(dst + i * p.cols, 0, row_bytes);
          } else {
            std::memcpy(dst + i * p.cols, src + r * p.cols, row_bytes);
          }
        }
      },
      /*min_chunk=*/std::max<int64_t>(1, 16384 / std::max<int64_t>(1, p.cols)));
}

}  // namespace inflight
