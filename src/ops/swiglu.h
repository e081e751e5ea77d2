// swiglu: the gated MLP activation of Llama-family models,
//
//   out[r, i] = silu(gate_up[r, i]) * gate_up[r, inter + i],   silu(g) = g / (1 + exp(-g))
//
// where gate_up is the output of one GEMM with the fused [gate; up] weight [2 * inter, hidden].
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace inflight {

struct SwigluParams {
  const void* gate_up = nullptr;  // [rows, 2 * inter]: gate in the first half, up in the second
  void* out = nullptr;            // [rows, inter]
  int64_t rows = 0;
  int64_t inter = 0;
  DType dtype = DType::kF32;
  // CUDA only, optional: out also quantized to e4m3 with a dynamic scale per row, as
  // quantize_fp8 (group 0) would quantize it, in the same pass (one block per row then).
  uint8_t* q_values = nullptr;  // [rows, inter]
  float* q_scales = nullptr;    // [rows]
  // With q_values: the caller reads q only, so rows the kernel holds in registers need not be
  // stored to out (its contents are then unspecified).
  bool skip_out = false;
};

// Validates gate_up [R, 2I] (float) and out [R, I] of the same dtype and device.
SwigluParams make_swiglu_params(const Tensor& gate_up, const Tensor& out);

// f32 only.
void swiglu_cpu(const SwigluParams& p);

}  // namespace inflight
