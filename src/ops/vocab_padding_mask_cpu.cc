#include <algorithm>
#include <limits>

#include "ops/vocab_padding_mask.h"

namespace inflight {

void vocab_padding_mask_cpu(const VocabPaddingMaskParams& p) {
  for (int64_t r = 0; r < p.rows; ++r) {
    float* row = p.logits + r * p.columns;
    std::fill(row + p.begin, row + p.columns, -std::numeric_limits<float>::infinity());
  }
}

}  // namespace inflight
