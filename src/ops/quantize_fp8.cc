#include "ops/quantize_fp8.h"

#include "ops/op_checks.h"

namespace inflight {

QuantizeFp8Params make_quantize_fp8_params(const Tensor& x, const Tensor* static_scale,
                                           int64_t group, const Tensor& values,
                                           const Tensor& scales) {
  constexpr const char* kOp = "quantize_fp8";
  INFLIGHT_CHECK_CODE(x.defined() && is_float_dtype(x.dtype()), ErrorCode::kInvalidArgument,
                      "{}: x must be a float tensor", kOp);
  const Device dev = x.device();
  check_tensor_kind(kOp, "x", x, x.dtype(), dev, 2);
  const int64_t m = x.size(0), k = x.size(1);
  INFLIGHT_CHECK_CODE(group >= 0 && (static_scale == nullptr || group == 0),
                      ErrorCode::kInvalidArgument,
                      "{}: group {} (must be >= 0, and 0 with a static scale)", kOp, group);
  if (static_scale != nullptr) check_tensor(kOp, "static_scale", *static_scale, DType::kF32, dev, {1});
  check_tensor(kOp, "values", values, DType::kF8E4M3, dev, {m, k});
  const Shape scale_shape = group == 0 ? Shape{m} : Shape{(k + group - 1) / group, m};
  check_tensor(kOp, "scales", scales, DType::kF32, dev, scale_shape);
  QuantizeFp8Params p;
  p.x = x.raw();
  p.static_scale = static_scale != nullptr ? static_scale->data<float>() : nullptr;
  p.values = static_cast<uint8_t*>(values.raw());
  p.scales = scales.data<float>();
  p.m = m;
  p.k = k;
  p.group = group;
  p.dtype = x.dtype();
  return p;
}

}  // namespace inflight
