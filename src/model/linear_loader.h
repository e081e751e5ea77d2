// Linear layers from stored weights: which format each is kept in on the device (bf16/f32, or
// FP8 e4m3 with scales: runtime/linear.h) and how its stored parts become that.
//
//   stored e4m3 (an FP8 checkpoint), backend with FP8  -> e4m3 bytes as stored, scales assembled
//                                                         for the fused tensor (below), checked
//   stored e4m3, backend without FP8                   -> dequantised to the compute dtype
//   stored unquantized, Quantization "online" (--quantization fp8-*) and a module it covers
//                                                      -> loaded in the compute dtype, then
//                                                         quantized: per channel on the device;
//                                                         per tensor or in 128 x 128 blocks on
//                                                         the host, each stored part as a
//                                                         checkpoint stores it (online_fp8.h),
//                                                         then loaded as such a checkpoint
//   anything else                                      -> the compute dtype
//
// Fused weights (q/k/v, gate/up) stack parts whose scales were made separately:
//   per-tensor scales become per-channel [N] (each part's rows keep their own scale; a single
//   part with static activations keeps [1]); static input scales take the largest of the parts
//   (the one x is quantized with); 128 x 128 block scales stay blocks when every part but the
//   last ends on a block boundary, else they become 1 x 128 groups of each row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/quantization.h"
#include "model/online_fp8.h"
#include "model/weight_plan.h"
#include "runtime/backend.h"
#include "runtime/linear.h"

namespace inflight {

struct PlannedLinear {
  std::string module;            // "model.layers.0.self_attn.qkv" style, for messages
  PlannedWeight weight;          // parts, shape [N, K], dtype as kept (compute dtype or f8_e4m3)
  bool quantize_online = false;  // stored unquantized, quantized at load as `online` says
  OnlineFp8Scheme online;
  Quantization::ActivationScales activations = Quantization::ActivationScales::kDynamicToken;

  bool fp8() const { return weight.dtype == DType::kF8E4M3; }
  // Device bytes of the weight and its scales.
  int64_t bytes() const;
};

// The plan of one linear layer over its stored parts (all of shape [rows_i, K], already
// checked): decides the format per the table above. Throws Error(kUnsupported) when the parts
// disagree (some e4m3, some not) or online FP8 is asked of a backend without it.
PlannedLinear plan_linear(const Backend& backend, const Quantization& quantization,
                          std::string module, PlannedWeight weight);

// Allocates and loads the planned layer into `out` (weight, scales; the bias is left alone).
// Throws Error(kInvalidFile) naming the tensor when a scale is NaN, infinite, zero or negative.
void load_linear(Backend& backend, const PlannedLinear& plan, Linear& out);

// Quantizes `w` (compute dtype, [N, K], on the device) into a new e4m3 weight as `online` says:
// per channel on the device (one scale per output channel, activations per token); per tensor
// or in blocks through the host (online_fp8.h), `w` one part named `name`. Dummy weights.
Linear quantize_linear_online(Backend& backend, const Tensor& w, const OnlineFp8Scheme& online,
                              const std::string& name = "weight");

}  // namespace inflight
