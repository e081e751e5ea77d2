#include "ops/gemm.h"

#include "ops/op_checks.h"

namespace inflight {

GemmParams make_gemm_params(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  constexpr const char* kOp = "gemm";
  INFLIGHT_CHECK_CODE(x.defined() && is_float_dtype(x.dtype()), ErrorCode::kInvalidArgument,
                      "{}: x must be a float tensor", kOp);
  const DType dt = x.dtype();
  const Device dev = x.device();
  check_tensor_kind(kOp, "x", x, dt, dev, 2);
  check_tensor_kind(kOp, "w", w, dt, dev, 2);
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  INFLIGHT_CHECK_CODE(w.size(1) == k, ErrorCode::kInvalidArgument,
                      "{}: x {} and w {} disagree on the inner dimension (w is [out, in])", kOp,
                      shape_str(x.shape()), shape_str(w.shape()));
  INFLIGHT_CHECK_CODE(k >= 1, ErrorCode::kInvalidArgument, "{}: inner dimension is 0", kOp);
  if (bias != nullptr) check_tensor(kOp, "bias", *bias, dt, dev, {n});
  INFLIGHT_CHECK_CODE(y.defined() && (y.dtype() == dt || y.dtype() == DType::kF32),
                      ErrorCode::kInvalidArgument, "{}: y must have x's dtype {} or f32", kOp,
                      dtype_name(dt));
  check_tensor(kOp, "y", y, y.dtype(), dev, {m, n});
  INFLIGHT_CHECK_CODE(y.numel() == 0 || (y.raw() != x.raw() && y.raw() != w.raw()),
                      ErrorCode::kInvalidArgument, "{}: y must not alias x or w", kOp);
  GemmParams p;
  p.x = x.raw();
  p.w = w.raw();
  p.bias = bias != nullptr ? bias->raw() : nullptr;
  p.y = y.raw();
  p.m = m;
  p.n = n;
  p.k = k;
  p.dtype = dt;
  p.y_dtype = y.dtype();
  return p;
}

}  // namespace inflight
