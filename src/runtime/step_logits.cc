#include "core/check.h"
#include "runtime/model_runner.h"

namespace inflight {

LogitsView StepLogits::row(int32_t r) {
  INFLIGHT_CHECK(r >= 0 && r < num_rows, "logits row {} outside [0, {})", r, num_rows);
  LogitsView view;
  const int32_t f = full_index.empty() ? -1 : full_index[static_cast<size_t>(r)];
  if (f >= 0) {
    view.full = std::span<float>(full.data<float>() + static_cast<int64_t>(f) * vocab_size,
                                 static_cast<size_t>(vocab_size));
    return view;
  }
  INFLIGHT_CHECK(top_k > 0, "logits row {} was asked for neither whole nor as candidates", r);
  view.top_ids = std::span<const int32_t>(top_ids.data<int32_t>() + static_cast<int64_t>(r) * top_k,
                                          static_cast<size_t>(top_k));
  view.top_logits = std::span<const float>(
      top_logits.data<float>() + static_cast<int64_t>(r) * top_k, static_cast<size_t>(top_k));
  view.log_sum_exp = log_sum_exp.data<float>()[r];
  return view;
}

}  // namespace inflight
