#include "ops/vocab_padding_mask.h"

#include "ops/op_checks.h"

namespace inflight {

VocabPaddingMaskParams make_vocab_padding_mask_params(const Tensor& logits, int64_t begin) {
  constexpr const char* kOp = "vocab_padding_mask";
  INFLIGHT_CHECK_CODE(logits.defined(), ErrorCode::kInvalidArgument, "{}: logits missing", kOp);
  check_tensor_kind(kOp, "logits", logits, DType::kF32, logits.device(), 2);
  INFLIGHT_CHECK_CODE(begin >= 0 && begin <= logits.size(1), ErrorCode::kInvalidArgument,
                      "{}: first masked column {} outside [0, {}]", kOp, begin, logits.size(1));
  return VocabPaddingMaskParams{logits.data<float>(), logits.size(0), logits.size(1), begin};
}

}  // namespace inflight
