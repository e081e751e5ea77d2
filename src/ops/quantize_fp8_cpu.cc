#include <algorithm>
#include <cmath>

#include "core/fp8.h"
#include "core/thread_pool.h"
#include "ops/quantize_fp8.h"

namespace inflight {

void quantize_fp8_cpu(const QuantizeFp8Params& p) {
  INFLIGHT_CHECK(p.dtype == DType::kF32, "quantize_fp8_cpu: f32 only, got {}", dtype_name(p.dtype));
  const auto* x = static_cast<const float*>(p.x);
  const int64_t k = p.k, group = p.group == 0 ? k : p.group;
  ThreadPool::global().parallel_for(
      p.m,
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const int64_t src = p.x_rows != nullptr ? p.x_rows[r] / p.x_row_div : r;
          const float* row = x + src * k;
          uint8_t* out = p.values + r * k;
          for (int64_t c0 = 0, j = 0; c0 < k; c0 += group, ++j) {
            const int64_t c1 = std::min(k, c0 + group);
            float scale;
            if (p.static_scale != nullptr) {
              scale = *p.static_scale;
            } else {
              float amax = 0.0f;
              for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(row[c]));
              scale = amax > 0.0f ? amax / kE4M3Max : 1.0f;
            }
            const float inv = 1.0f / scale;
            for (int64_t c = c0; c < c1; ++c) out[c] = f32_to_e4m3(row[c] * inv);
            p.scales[p.group == 0 ? r : j * p.m + r] = scale;
          }
        }
      },
      /*min_chunk=*/std::max<int64_t>(1, 4096 / std::max<int64_t>(1, k)));
}

}  // namespace inflight
