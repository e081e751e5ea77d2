#include <limits>

#include "core/check.h"
#include "core/thread_pool.h"
#include "ops/token_bitmask.h"

namespace inflight {

void token_bitmask_cpu(const TokenBitmaskParams& p) {
  for (int64_t m = 0; m < p.masked_rows; ++m) {
    INFLIGHT_CHECK_CODE(p.rows[m] >= 0 && p.rows[m] < p.logits_rows, ErrorCode::kInvalidArgument,
                        "token_bitmask: row {} outside [0, {})", p.rows[m], p.logits_rows);
  }
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  ThreadPool::global().parallel_for(p.masked_rows, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      float* row = p.logits + p.rows[m] * p.vocab;
      const uint32_t* mask = p.bitmask + m * p.words;
      for (int64_t v = 0; v < p.vocab; ++v) {
        if (((mask[v >> 5] >> (v & 31)) & 1u) == 0) row[v] = kNegInf;
      }
    }
  });
}

}  // namespace inflight
