// LogitsView: one logits row on the host as the sampler receives it from a step.
#pragma once

#include <cstdint>
#include <span>

namespace inflight {

// One logits row as the sampler receives it: whole, or its best candidates.
struct LogitsView {
  std::span<float> full;              // [vocab], or empty
  std::span<const int32_t> top_ids;   // best first, equal logits by lower id
  std::span<const float> top_logits;  // raw logits of top_ids
  float log_sum_exp = 0.0f;           // of the raw row, with candidates
};

}  // namespace inflight
