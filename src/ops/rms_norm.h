// rms_norm, fused with the residual add of a pre-norm transformer:
//
//   residual <- residual + add            (skipped when add is null)
//   out      <- residual * rsqrt(mean(residual^2) + eps) * weight
//
// so one call closes a sub-layer (adds its output into the residual stream) and opens the next
// (normalises the stream). The first layer passes add = null with the embeddings in residual.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace inflight {

struct RmsNormParams {
  const void* add = nullptr;     // [rows, dim] or null
  void* residual = nullptr;      // [rows, dim], updated in place when add is set
  const void* weight = nullptr;  // [dim]
  void* out = nullptr;           // [rows, dim]; must not alias residual or add
  int64_t rows = 0;
  int64_t dim = 0;
  float eps = 1e-5f;
  DType dtype = DType::kF32;
  // CUDA only, optional: out also quantized to e4m3 with a dynamic scale per row, as
  // quantize_fp8 (group 0) would quantize it, in the same pass.
  uint8_t* q_values = nullptr;  // [rows, dim]
  float* q_scales = nullptr;    // [rows]
  // With q_values: the caller reads q only, so rows the kernel holds in registers need not be
  // stored to out (its contents are then unspecified; residual is always written).
  bool skip_out = false;
};

// Validates: residual [R, D] float; add (optional) and out [R, D], weight [D], all of residual's
// dtype and device; out distinct from residual and add; eps > 0.
RmsNormParams make_rms_norm_params(const Tensor* add, const Tensor& residual, const Tensor& weight,
                                   float eps, const Tensor& out);

// f32 only; statistics accumulate in double per row.
void rms_norm_cpu(const RmsNormParams& p);

}  // namespace inflight
