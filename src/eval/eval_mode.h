// EvalMode: one configuration of a model that `inflight eval` compares against the reference
// (the model as stored, dequantised to the backend's compute dtype: f32 on the CPU, bf16 on
// CUDA). Written "<weights>[+kv-<dtype>]":
//
//   weights  base          no quantization: the reference configuration itself (its KL is 0)
//            fp8-tensor    online FP8, one weight scale per tensor, activations per token
//            fp8-channel   online FP8, one weight scale per output channel, activations per token
//            fp8-block     online FP8, 128 x 128 weight blocks, activations per 1 x 128 group
//                          (formats/quantization.h, Quantization::online)
//   kv       kv-auto       the checkpoint's own KV cache dtype (the default: the compute dtype
//                          unless it declares an FP8 cache)
//            kv-bf16       the compute dtype (f32 on the CPU, bf16 on CUDA)
//            kv-fp8        e4m3 with a scale per token and kv head (docs/quantization.md)
//
// e.g. "fp8-channel", "fp8-block+kv-fp8", "base+kv-fp8" (FP8 KV cache only).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace inflight::eval {

struct EvalMode {
  std::string name;                     // canonical: "fp8-block+kv-fp8", "base"
  std::string quantization;             // "" (base) or a Quantization::online name
  std::string kv_cache_dtype = "auto";  // "auto" | "bf16" | "fp8"

  // Whether this is the reference's own configuration (base, KV cache in the compute dtype).
  bool is_reference() const { return quantization.empty() && kv_cache_dtype == "auto"; }
};

// Parses one mode. Throws Error(kInvalidArgument) naming the part it does not know and listing
// the valid ones.
EvalMode parse_eval_mode(std::string_view text);
// Parses a comma-separated list ("fp8-tensor,fp8-channel"). Throws Error(kInvalidArgument) for
// an empty list, an empty entry or a mode named twice.
std::vector<EvalMode> parse_eval_modes(std::string_view list);

}  // namespace inflight::eval
