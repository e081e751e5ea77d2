// The row loop of the CPU norms fused with the residual add (ops/rms_norm.h, ops/layer_norm.h):
//
//   for each row r of [rows, dim], in parallel over rows:
//     residual[r] <- residual[r] + add[r]        (skipped when add is null)
//     out[r]      <- normalize(residual[r])      the norm's statistics, scale (and shift)
//
// `normalize(x, y)` reads the updated residual row x [dim] and writes the output row y [dim];
// it sees one row only, so rows may run on any thread in any order.
//
// rms_normalize_row is RMSNorm's arithmetic on one row (also the per-head q/k norm's,
// ops/qk_norm.h): the sum of squares in f64, y = x / rms(x) * w; y may be x.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/thread_pool.h"
#include "ops/rms_norm.h"

namespace inflight {

inline void rms_normalize_row(const float* x, float* y, const float* w, int64_t dim, float eps) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const auto inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps));
  for (int64_t i = 0; i < dim; ++i) y[i] = x[i] * inv_rms * w[i];
}

template <class Normalize>
void add_and_normalize_rows_cpu(const RmsNormParams& p, const Normalize& normalize) {
  const auto* add = static_cast<const float*>(p.add);
  auto* residual = static_cast<float*>(p.residual);
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
          normalize(static_cast<const float*>(x), out + r * dim);
        }
      },
      /*min_chunk=*/std::max<int64_t>(1, 8192 / std::max<int64_t>(1, dim)));
}

}  // namespace inflight
