#include "ops/rms_norm.h"

#include "ops/op_checks.h"

namespace inflight {

RmsNormParams make_rms_norm_params(const Tensor* add, const Tensor& residual, const Tensor& weight,
                                   float eps, const Tensor& out) {
  constexpr const char* kOp = "rms_norm";
  INFLIGHT_CHECK_CODE(residual.defined() && is_float_dtype(residual.dtype()),
                      ErrorCode::kInvalidArgument, "{}: residual must be a float tensor", kOp);
  const DType dt = residual.dtype();
  const Device dev = residual.device();
  check_tensor_kind(kOp, "residual", residual, dt, dev, 2);
  const Shape shape = residual.shape();
  if (add != nullptr) check_tensor(kOp, "add", *add, dt, dev, shape);
  check_tensor(kOp, "weight", weight, dt, dev, {shape[1]});
  check_tensor(kOp, "out", out, dt, dev, shape);
  INFLIGHT_CHECK_CODE(out.raw() != residual.raw() || out.numel() == 0, ErrorCode::kInvalidArgument,
                      "{}: out must not alias residual", kOp);
  INFLIGHT_CHECK_CODE(add == nullptr || out.raw() != add->raw() || out.numel() == 0,
                      ErrorCode::kInvalidArgument, "{}: out must not alias add", kOp);
  INFLIGHT_CHECK_CODE(eps > 0.0f, ErrorCode::kInvalidArgument, "{}: eps must be > 0, got {}", kOp,
                      eps);
  RmsNormParams p;
  p.add = add != nullptr ? add->raw() : nullptr;
  p.residual = residual.raw();
  p.weight = weight.raw();
  p.out = out.raw();
  p.rows = shape[0];
  p.dim = shape[1];
  p.eps = eps;
  p.dtype = dt;
  return p;
}

}  // namespace inflight
