// gelu: the exact (erf) GELU of MPT's MLP (up -> gelu -> down, no gate), as PyTorch's
// nn.GELU(approximate="none") computes it:
//
//   out[r, i] = 0.5 * x[r, i] * (1 + erf(x[r, i] / sqrt(2)))
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace inflight {

struct GeluParams {
  const void* x = nullptr;  // [rows, cols]
  void* out = nullptr;      // [rows, cols]; may alias x
  int64_t numel = 0;
  DType dtype = DType::kF32;
};

// Validates x [R, C] (float) and out of x's shape, dtype and device.
GeluParams make_gelu_params(const Tensor& x, const Tensor& out);

// f32 only.
void gelu_cpu(const GeluParams& p);

}  // namespace inflight
