#include "ops/moe_route.h"

#include "ops/op_checks.h"

namespace inflight {

MoeRouteParams make_moe_route_params(const Tensor& logits, int32_t k, bool renormalize,
                                     const Tensor& ids, const Tensor& weights) {
  constexpr const char* kOp = "moe_route";
  INFLIGHT_CHECK_CODE(logits.defined(), ErrorCode::kInvalidArgument, "{}: logits are missing", kOp);
  check_tensor_kind(kOp, "logits", logits, DType::kF32, logits.device(), 2);
  const int64_t tokens = logits.size(0), experts = logits.size(1);
  INFLIGHT_CHECK_CODE(experts >= 1 && experts <= kMoeMaxExperts, ErrorCode::kInvalidArgument,
                      "{}: {} experts, expected 1..{}", kOp, experts, kMoeMaxExperts);
  INFLIGHT_CHECK_CODE(k >= 1 && k <= experts && k <= kMoeMaxTopK, ErrorCode::kInvalidArgument,
                      "{}: top-k {} must be in 1..min({} experts, {})", kOp, k, experts,
                      kMoeMaxTopK);
  check_tensor(kOp, "ids", ids, DType::kI32, logits.device(), {tokens, k});
  check_tensor(kOp, "weights", weights, DType::kF32, logits.device(), {tokens, k});
  MoeRouteParams p;
  p.logits = logits.data<float>();
  p.ids = ids.data<int32_t>();
  p.weights = weights.data<float>();
  p.tokens = tokens;
  p.num_experts = experts;
  p.k = k;
  p.renormalize = renormalize;
  return p;
}

}  // namespace inflight
