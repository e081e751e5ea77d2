// Linear: a weight on the device as a GEMM reads it (Backend::gemm): y = x W^T (+ bias).
//
// The weight keeps the format the backend's weight policy chose (Backend::weight_dtype): bf16
// or f32 today; quantized formats carry their dequantisation scales here, so the GEMM entry
// point sees everything it needs in one value.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/check.h"
#include "core/tensor.h"

namespace inflight {

struct Linear {
  Tensor weight;  // [N, K]
  Tensor bias;    // [N], or undefined
  // Quantized weights: f32 scales, [1] (per tensor), [N] (per output channel) or
  // [ceil(N / group), ceil(K / group)] (blocks); undefined for unscaled weights.
  Tensor scale;
  int64_t group_size = 0;

  const Tensor* bias_or_null() const { return bias.defined() ? &bias : nullptr; }
  // Throws Error(kUnsupported) when the weight is scaled (a backend without quantized GEMMs).
  void require_unscaled(std::string_view backend) const {
    INFLIGHT_CHECK_CODE(!scale.defined(), ErrorCode::kUnsupported,
                        "the {} backend has no GEMM for scaled {} weights", backend,
                        dtype_name(weight.dtype()));
  }

  int64_t out_features() const { return weight.size(0); }
  int64_t in_features() const { return weight.size(1); }
  int64_t nbytes() const {
    int64_t n = static_cast<int64_t>(weight.nbytes());
    if (bias.defined()) n += static_cast<int64_t>(bias.nbytes());
    if (scale.defined()) n += static_cast<int64_t>(scale.nbytes());
    return n;
  }
};

}  // namespace inflight
