// Linear: a weight on the device as a GEMM reads it (Backend::gemm): y = x W^T (+ bias).
//
// The weight keeps the format the backend's weight policy chose (Backend::weight_dtype): the
// compute dtype, or FP8 e4m3 with its dequantisation scales (formats/quantization.h), so the
// GEMM entry point sees everything it needs in one value.
//
// FP8 (W8A8): y[m, n] = sum_k xq[m, k] sx(m, k) * wq[n, k] sw(n, k), products of e4m3 values
// accumulated in f32, where
//   sw(n, k) = scale[0]                                   (scale [1]: per tensor)
//            = scale[n]                                   (scale [N]: per output channel)
//            = scale[n / block_rows, k / block_cols]      (blocks: 128 x 128, or 1 x 128;
//                                                           rows padded to a multiple of 4)
// and xq, sx are x quantized while running (QuantizedActivations below) as `activations` says:
//   kDynamicToken   sx(m, k) = amax(x[m, :]) / 448
//   kDynamicGroup   sx(m, k) = amax(x[m, g*bc : (g+1)*bc]) / 448, g = k / block_cols
//   kStaticTensor   sx(m, k) = input_scale[0] (calibrated; x / sx saturates at +-448)
#pragma once

#include <cstdint>
#include <string_view>

#include "core/check.h"
#include "core/tensor.h"
#include "formats/quantization.h"

namespace inflight {

struct Linear {
  using ActivationScales = Quantization::ActivationScales;

  Tensor weight;  // [N, K]: the compute dtype, or f8_e4m3 with `scale`
  Tensor bias;    // [N], or undefined
  // f8_e4m3 weights: f32 scales [1], [N] or [ceil(N / block_rows), round_up(ceil(K /
  // block_cols), 4)] (blocks; each row padded with zeros to a multiple of 4 scales, the layout
  // cuBLASLt's 128 x 128 block scaling reads); undefined for unscaled weights.
  // block_rows/block_cols are 0 unless the scales are blocks.
  Tensor scale;
  int64_t block_rows = 0;
  int64_t block_cols = 0;
  ActivationScales activations = ActivationScales::kDynamicToken;
  Tensor input_scale;  // kStaticTensor: f32 [1]

  bool quantized() const { return scale.defined(); }
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
    for (const Tensor* t : {&bias, &scale, &input_scale}) {
      if (t->defined()) n += static_cast<int64_t>(t->nbytes());
    }
    return n;
  }
};

// The input of a scaled GEMM: x [M, K] quantized to e4m3 for the weight it multiplies
// (Backend::quantize_activations). `scales` f32: [M] (per token; a static scale repeated per
// row) or [ceil(K / block_cols), M] (groups; group-major, as the block-scaled GEMM reads them).
struct QuantizedActivations {
  Tensor values;  // [M, K] f8_e4m3
  Tensor scales;

  int64_t rows() const { return values.size(0); }
};

}  // namespace inflight
