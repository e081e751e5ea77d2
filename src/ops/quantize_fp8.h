// quantize_fp8: activations x [m, k] -> e4m3 values and f32 scales for a scaled GEMM
// (runtime/linear.h), value = e4m3(x * (1 / scale)) rounded to nearest even, saturating at +-448:
//
//   dynamic, group 0:  scale[r]         = amax(x[r, :]) / 448                scales [m]
//   dynamic, group g:  scale[j * m + r] = amax(x[r, j*g : (j+1)*g]) / 448    scales [ceil(k/g), m]
//   static:            scale[r]         = *static_scale (calibrated)         scales [m]
//
// An all-zero row or group gets scale 1 (its values are 0 whatever the scale).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace inflight {

struct QuantizeFp8Params {
  const void* x = nullptr;          // [m, k], or gathered through x_rows
  const int32_t* x_rows = nullptr;  // [m]: output row r quantizes x's row x_rows[r] / x_row_div
  int32_t x_row_div = 1;
  const float* static_scale = nullptr;  // [1], or null: dynamic
  uint8_t* values = nullptr;            // [m, k] e4m3
  float* scales = nullptr;              // [m], or [ceil(k / group), m]
  int64_t m = 0;
  int64_t k = 0;
  int64_t group = 0;          // columns per scale (dynamic only); 0: the whole row
  DType dtype = DType::kF32;  // of x
};

// Validates x [m, k] (float), static_scale (f32 [1], or null), values [m, k] f8_e4m3 and scales
// f32 of the shape above, all on x's device; group >= 0 and 0 with a static scale.
QuantizeFp8Params make_quantize_fp8_params(const Tensor& x, const Tensor* static_scale,
                                           int64_t group, const Tensor& values,
                                           const Tensor& scales);

// f32 x only.
void quantize_fp8_cpu(const QuantizeFp8Params& p);

}  // namespace inflight
