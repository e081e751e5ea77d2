#include "ops/clamp.h"

#include <cmath>

#include "ops/op_checks.h"

namespace inflight {

ClampParams make_clamp_params(const Tensor& x, float limit) {
  constexpr const char* kOp = "clamp";
  INFLIGHT_CHECK_CODE(x.defined() && is_float_dtype(x.dtype()), ErrorCode::kInvalidArgument,
                      "{}: x must be a float tensor", kOp);
  check_tensor(kOp, "x", x, x.dtype(), x.device(), x.shape());
  INFLIGHT_CHECK_CODE(std::isfinite(limit) && limit > 0.0f, ErrorCode::kInvalidArgument,
                      "{}: limit must be positive and finite, got {}", kOp, limit);
  ClampParams p;
  p.x = x.raw();
  p.numel = x.numel();
  p.limit = limit;
  p.dtype = x.dtype();
  return p;
}

}  // namespace inflight
