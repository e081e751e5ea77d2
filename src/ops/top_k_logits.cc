#include "ops/top_k_logits.h"

#include <algorithm>

#include "ops/op_checks.h"

namespace inflight {

TopKLogitsParams make_top_k_logits_params(const Tensor& logits, int32_t k,
                                          const Tensor& log_sum_exp, const Tensor& top_ids,
                                          const Tensor& top_logits) {
  constexpr const char* kOp = "top_k_logits";
  INFLIGHT_CHECK_CODE(logits.defined(), ErrorCode::kInvalidArgument, "{}: logits missing", kOp);
  const Device dev = logits.device();
  check_tensor_kind(kOp, "logits", logits, DType::kF32, dev, 2);
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  INFLIGHT_CHECK_CODE(k >= 1 && k <= std::min<int64_t>(vocab, kTopKLogitsMax),
                      ErrorCode::kInvalidArgument, "{}: k = {} must be in [1, min({}, {})]", kOp, k,
                      vocab, kTopKLogitsMax);
  check_tensor(kOp, "log_sum_exp", log_sum_exp, DType::kF32, dev, {rows});
  check_tensor(kOp, "top_ids", top_ids, DType::kI32, dev, {rows, k});
  check_tensor(kOp, "top_logits", top_logits, DType::kF32, dev, {rows, k});
  TopKLogitsParams p;
  p.logits = logits.data<float>();
  p.log_sum_exp = log_sum_exp.data<float>();
  p.top_ids = top_ids.data<int32_t>();
  p.top_logits = top_logits.data<float>();
  p.rows = rows;
  p.vocab = vocab;
  p.k = k;
  return p;
}

}  // namespace inflight
