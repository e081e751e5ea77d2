#include "ops/scaled_gemm.h"

#include "ops/op_checks.h"

namespace inflight {

ScaledGemmParams make_scaled_gemm_params(const QuantizedActivations& x, const Linear& w,
                                         const Tensor& y) {
  constexpr const char* kOp = "scaled_gemm";
  using ActivationScales = Linear::ActivationScales;
  INFLIGHT_CHECK_CODE(x.values.defined(), ErrorCode::kInvalidArgument, "{}: x is missing", kOp);
  const Device dev = x.values.device();
  check_tensor_kind(kOp, "x", x.values, DType::kF8E4M3, dev, 2);
  check_tensor_kind(kOp, "w", w.weight, DType::kF8E4M3, dev, 2);
  const int64_t m = x.values.size(0), k = x.values.size(1), n = w.weight.size(0);
  INFLIGHT_CHECK_CODE(w.weight.size(1) == k, ErrorCode::kInvalidArgument,
                      "{}: x {} and w {} disagree on the inner dimension (w is [out, in])", kOp,
                      shape_str(x.values.shape()), shape_str(w.weight.shape()));
  INFLIGHT_CHECK_CODE(k >= 1, ErrorCode::kInvalidArgument, "{}: inner dimension is 0", kOp);

  ScaledGemmParams p;
  const bool blocks = w.block_cols > 0;
  INFLIGHT_CHECK_CODE(blocks == (w.activations == ActivationScales::kDynamicGroup),
                      ErrorCode::kInvalidArgument,
                      "{}: block-scaled weights take activations scaled per group, and only they",
                      kOp);
  if (blocks) {
    INFLIGHT_CHECK_CODE(w.block_rows >= 1, ErrorCode::kInvalidArgument,
                        "{}: block scales need block_rows >= 1", kOp);
    const int64_t groups = (k + w.block_cols - 1) / w.block_cols;
    const int64_t stride = (groups + 3) / 4 * 4;
    check_tensor(kOp, "w.scale", w.scale, DType::kF32, dev,
                 {(n + w.block_rows - 1) / w.block_rows, stride});
    check_tensor(kOp, "x.scales", x.scales, DType::kF32, dev, {groups, m});
    p.w_scale_rows = w.block_rows;
    p.group = w.block_cols;
    p.w_scale_stride = stride;
  } else {
    INFLIGHT_CHECK_CODE(w.scale.defined() && w.scale.dim() == 1 &&
                            (w.scale.size(0) == 1 || w.scale.size(0) == n),
                        ErrorCode::kInvalidArgument,
                        "{}: w.scale must be f32 [1] or [{}], got {}", kOp, n,
                        w.scale.defined() ? shape_str(w.scale.shape()) : "none");
    check_tensor(kOp, "w.scale", w.scale, DType::kF32, dev, w.scale.shape());
    check_tensor(kOp, "x.scales", x.scales, DType::kF32, dev, {m});
    p.w_scale_rows = w.scale.size(0) == 1 ? 0 : 1;
  }
  if (w.activations == ActivationScales::kStaticTensor) {
    check_tensor(kOp, "w.input_scale", w.input_scale, DType::kF32, dev, {1});
    p.static_x_scale = true;
    p.static_x_scale_ptr = w.input_scale.data<float>();
  }
  INFLIGHT_CHECK_CODE(y.defined() && is_float_dtype(y.dtype()), ErrorCode::kInvalidArgument,
                      "{}: y must be a float tensor", kOp);
  check_tensor(kOp, "y", y, y.dtype(), dev, {m, n});
  if (w.bias.defined()) check_tensor(kOp, "bias", w.bias, y.dtype(), dev, {n});
  p.x = static_cast<const uint8_t*>(x.values.raw());
  p.x_scales = x.scales.data<float>();
  p.w = static_cast<const uint8_t*>(w.weight.raw());
  p.w_scales = w.scale.data<float>();
  p.bias = w.bias.defined() ? w.bias.raw() : nullptr;
  p.y = y.raw();
  p.m = m;
  p.n = n;
  p.k = k;
  p.y_dtype = y.dtype();
  return p;
}

}  // namespace inflight
