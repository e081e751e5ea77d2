// layer_norm, fused with the residual add of a pre-norm transformer (MPT), as rms_norm is:
//
//   residual <- residual + add            (skipped when add is null)
//   out      <- (residual - mean) * rsqrt(var + eps) * weight (+ bias)
//
// mean and var (biased, over the row) are taken of the residual as stored. bias is optional
// (MPT's no_bias: true stores none).
#pragma once

#include "core/tensor.h"
#include "ops/rms_norm.h"

namespace inflight {

struct LayerNormParams {
  RmsNormParams norm;          // add, residual, weight, out, rows, dim, eps, dtype
  const void* bias = nullptr;  // [dim] or null
};

// Validates as make_rms_norm_params does, and bias (optional) [D] of residual's dtype and device.
LayerNormParams make_layer_norm_params(const Tensor* add, const Tensor& residual,
                                       const Tensor& weight, const Tensor* bias, float eps,
                                       const Tensor& out);

// f32 only; statistics accumulate in double per row (mean first, then the centred squares).
void layer_norm_cpu(const LayerNormParams& p);

}  // namespace inflight
