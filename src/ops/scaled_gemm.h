// scaled_gemm: the FP8 linear layer (W8A8), y = dequant(x) dequant(w)^T (+ bias), with x and w
// e4m3 and their f32 scales as runtime/linear.h defines them:
//
//   y[i, j] = sum over k-groups g of sx(i, g) sw(j, g) sum_{k in g} x[i, k] w[j, k]  (+ bias[j])
//
//   x [m, k] e4m3, x_scales f32: [m] (per row) or [ceil(k / group), m] (groups of `group` columns)
//   w [n, k] e4m3, w_scales f32: [1], [n], or [ceil(n / block_rows), w_scale_stride] (blocks:
//                                 ceil(k / group) scales per row, padded to a multiple of 4)
//   bias [n] of y's dtype, y [m, n]
//
// The products of e4m3 values are exact in f32; sums are f32.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "runtime/linear.h"

namespace inflight {

struct ScaledGemmParams {
  const uint8_t* x = nullptr;
  const float* x_scales = nullptr;
  const uint8_t* w = nullptr;
  const float* w_scales = nullptr;
  const void* bias = nullptr;  // null: no bias
  void* y = nullptr;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  // Scale granularity: w_scale_rows 0 = one scale for the whole weight, 1 = one per row, > 1 =
  // blocks of that many rows; group 0 = whole rows (x per row, w per tensor or channel), > 0 =
  // groups of that many columns (x and w, block scaling).
  int64_t w_scale_rows = 0;
  int64_t group = 0;
  int64_t w_scale_stride = 0;  // blocks: floats from one row of w_scales to the next
  // x carries the one static per-tensor scale (x_scales[i] equal for every row), which a
  // backend may apply as a scalar.
  bool static_x_scale = false;
  const float* static_x_scale_ptr = nullptr;  // [1]: the static scale, when static_x_scale
  DType y_dtype = DType::kF32;  // the compute dtype or f32
};

// Validates x against w's scheme (runtime/linear.h): x.values [m, k] and w.weight [n, k] e4m3 on
// one device, scales of the shapes above, bias [n] of y's dtype, y [m, n] float.
ScaledGemmParams make_scaled_gemm_params(const QuantizedActivations& x, const Linear& w,
                                         const Tensor& y);

// f32 y only. Each y[i, j] is reduced in an order that depends only on k (batch invariant).
void scaled_gemm_cpu(const ScaledGemmParams& p);

}  // namespace inflight
