#include "ops/gelu.h"

#include "ops/op_checks.h"

namespace inflight {

GeluParams make_gelu_params(const Tensor& x, const Tensor& out) {
  constexpr const char* kOp = "gelu";
  INFLIGHT_CHECK_CODE(x.defined() && is_float_dtype(x.dtype()), ErrorCode::kInvalidArgument,
                      "{}: x must be a float tensor", kOp);
  check_tensor_kind(kOp, "x", x, x.dtype(), x.device(), 2);
  check_tensor(kOp, "out", out, x.dtype(), x.device(), x.shape());
  GeluParams p;
  p.x = x.raw();
  p.out = out.raw();
  p.numel = x.numel();
  p.dtype = x.dtype();
  return p;
}

}  // namespace inflight
