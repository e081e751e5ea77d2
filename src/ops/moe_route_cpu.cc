#include <algorithm>
#include <cmath>
#include <limits>

#include "core/thread_pool.h"
#include "ops/moe_route.h"

namespace inflight {

void moe_route_cpu(const MoeRouteParams& p) {
  const int64_t e_count = p.num_experts;
  ThreadPool::global().parallel_for(
      p.tokens,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const float* logits = p.logits + t * e_count;
          int32_t* ids = p.ids + t * p.k;
          float* weights = p.weights + t * p.k;
          // A NaN ranks as -inf (softmax below then makes its probability NaN, as the
          // reference would; the ids stay valid).
          auto key = [&](int64_t e) {
            const float v = logits[e];
            return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v;
          };
          float max_logit = -std::numeric_limits<float>::infinity();
          for (int64_t e = 0; e < e_count; ++e) max_logit = std::max(max_logit, key(e));
          double sum = 0.0;
          for (int64_t e = 0; e < e_count; ++e) sum += std::exp(double{logits[e]} - max_logit);
          // k passes of argmax over the experts not chosen yet: k and E are small.
          double chosen_sum = 0.0;
          for (int32_t j = 0; j < p.k; ++j) {
            int64_t best = -1;
            for (int64_t e = 0; e < e_count; ++e) {
              bool taken = false;
              for (int32_t i = 0; i < j; ++i) taken |= ids[i] == e;
              if (taken) continue;
              if (best < 0 || key(e) > key(best)) best = e;  // ties: the lower id stays
            }
            ids[j] = static_cast<int32_t>(best);
            const double prob = std::exp(double{logits[best]} - max_logit) / sum;
            weights[j] = static_cast<float>(prob);
            chosen_sum += prob;
          }
          if (p.renormalize) {
            for (int32_t j = 0; j < p.k; ++j) {
              weights[j] = static_cast<float>(std::exp(double{logits[ids[j]]} - max_logit) / sum /
                                              chosen_sum);
            }
          }
        }
      },
      /*min_chunk=*/std::max<int64_t>(1, 1024 / e_count));
}

}  // namespace inflight
