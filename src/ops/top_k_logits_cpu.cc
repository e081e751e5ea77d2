#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/thread_pool.h"
#include "ops/top_k_logits.h"

namespace inflight {

void top_k_logits_cpu(const TopKLogitsParams& p) {
  ThreadPool::global().parallel_for(
      p.rows,
      [&](int64_t begin, int64_t end) {
        std::vector<int32_t> ids(static_cast<size_t>(p.vocab));
        for (int64_t r = begin; r < end; ++r) {
          const float* row = p.logits + r * p.vocab;
          const float max = *std::max_element(row, row + p.vocab);
          float lse = -std::numeric_limits<float>::infinity();
          if (max > -std::numeric_limits<float>::infinity()) {
            double sum = 0.0;
            for (int64_t i = 0; i < p.vocab; ++i) {
              sum += std::exp(static_cast<double>(row[i]) - static_cast<double>(max));
            }
            lse = static_cast<float>(static_cast<double>(max) + std::log(sum));
          }
          p.log_sum_exp[r] = lse;
          std::iota(ids.begin(), ids.end(), 0);
          // -0.0 == +0.0 under <, so both compare equal and fall back to the id.
          std::partial_sort(ids.begin(), ids.begin() + p.k, ids.end(), [row](int32_t a, int32_t b) {
            return row[a] > row[b] || (row[a] == row[b] && a < b);
          });
          for (int32_t j = 0; j < p.k; ++j) {
            p.top_ids[r * p.k + j] = ids[static_cast<size_t>(j)];
            p.top_logits[r * p.k + j] = row[ids[static_cast<size_t>(j)]];
          }
        }
      },
      /*min_chunk=*/1);
}

}  // namespace inflight
