#include "ops/token_bitmask.h"

#include "ops/op_checks.h"

namespace inflight {

TokenBitmaskParams make_token_bitmask_params(const Tensor& logits, const Tensor& rows,
                                             const Tensor& bitmask) {
  constexpr const char* kOp = "token_bitmask";
  INFLIGHT_CHECK_CODE(logits.defined(), ErrorCode::kInvalidArgument, "{}: logits missing", kOp);
  const Device dev = logits.device();
  check_tensor_kind(kOp, "logits", logits, DType::kF32, dev, 2);
  INFLIGHT_CHECK_CODE(rows.defined(), ErrorCode::kInvalidArgument, "{}: rows missing", kOp);
  const int64_t masked = rows.numel();
  const int64_t vocab = logits.size(1);
  const int64_t words = (vocab + 31) / 32;
  check_tensor(kOp, "rows", rows, DType::kI32, dev, {masked});
  check_tensor(kOp, "bitmask", bitmask, DType::kI32, dev, {masked, words});
  TokenBitmaskParams p;
  p.logits = logits.data<float>();
  p.rows = rows.data<int32_t>();
  p.bitmask = reinterpret_cast<const uint32_t*>(bitmask.data<int32_t>());
  p.logits_rows = logits.size(0);
  p.vocab = vocab;
  p.masked_rows = masked;
  p.words = words;
  return p;
}

}  // namespace inflight
