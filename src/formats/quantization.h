// Quantization: how a checkpoint's linear layers are quantized (FP8 today), as its files say or as
// asked for at load. One value per model; the model layer applies it to every linear layer it
// does not exclude, the backends run the scaled GEMMs (runtime/linear.h).
//
// Read from (Quantization::from_hf):
//   config.json "quantization_config":
//     compressed-tensors (llm-compressor): quant_method "compressed-tensors",
//       format "float-quantized" (or "naive-quantized" with float 8-bit types), one config group
//       targeting Linear: weights {type float, num_bits 8, strategy tensor | channel | block
//       (block_structure [128, 128])}, input_activations {dynamic true: strategy token (or
//       tensor: run per token, kDynamicToken, which is finer and never less accurate than one
//       scale for the whole tensor) | group (group_size 128, with block weights); dynamic false:
//       strategy tensor (static `input_scale`)}, "ignore" (names or "re:" patterns),
//       kv_cache_scheme (static per-tensor k_scale / v_scale);
//     native FP8: quant_method "fp8", fmt "e4m3", weight_block_size [128, 128] (scales
//       `weight_scale_inv`, activations dynamic per token and 128 columns), or no block size
//       (per-tensor `weight_scale`, activation_scheme "static" (input_scale) or "dynamic");
//       "modules_to_not_convert" / "ignored_layers" excluded;
//     ModelOpt: quant_method "modelopt" with quant_algo "FP8" (the same keys as below);
//   hf_quant_config.json (ModelOpt): {"quantization": {"quant_algo": "FP8",
//     "kv_cache_quant_algo": "FP8" | null, "exclude_modules": [...]}}: per-tensor `weight_scale`,
//     static per-tensor `input_scale`, k_scale / v_scale.
// Anything else quantized (int4 AWQ/GPTQ, e5m2, weight-only FP8, several config groups) is
// refused with Error(kUnsupported) naming the key and value.
//
// Tensor names in such checkpoints, for a linear layer `<module>` (e.g.
// model.layers.0.self_attn.q_proj): `<module>.weight` (F8_E4M3), `<module>.weight_scale` (or
// `.weight_scale_inv`, native block FP8), `<module>.input_scale` (static activations); per layer
// `model.layers.<i>.self_attn.{k,v}_scale` (or `.k_proj.k_scale` / `.v_proj.v_scale`, ModelOpt).
// The loader (HfModelFiles::load_raw) attaches the scales to the weight's StoredTensor.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace inflight {

struct Quantization {
  enum class Method : uint8_t { kNone, kFp8 };
  // Granularity of the weight scales (f32, one per ...): the whole tensor, each output channel
  // (row), or each block_rows x block_cols block.
  enum class WeightScales : uint8_t { kTensor, kChannel, kBlock };
  // Granularity of the activation scales: computed per token (row) while running, per token and
  // block_cols columns while running (with block weights), or one static per-tensor scale
  // stored in the checkpoint (`input_scale`).
  enum class ActivationScales : uint8_t { kDynamicToken, kDynamicGroup, kStaticTensor };

  Method method = Method::kNone;
  // Where it came from: "compressed-tensors", "fp8", "modelopt", or "online" (asked for at load:
  // a bf16/f16/f32 checkpoint or dummy weights quantized as they are loaded).
  std::string source;
  WeightScales weights = WeightScales::kChannel;
  int64_t block_rows = 0;  // kBlock: 128 x 128
  int64_t block_cols = 0;
  ActivationScales activations = ActivationScales::kDynamicToken;
  // Linear modules left unquantized: exact names ("lm_head", "model.layers.0.mlp.down_proj"),
  // "re:<ECMAScript regex>" matched against the whole name, a name's last component
  // ("down_proj" excludes every down_proj), or a shell glob ("model.layers.*.mlp.gate", as
  // ModelOpt's exclude_modules write them; '*' crosses dots), as the three formats write them.
  std::vector<std::string> ignore;
  // The checkpoint stores per-layer KV-cache scales (k_scale / v_scale) for an FP8 KV cache.
  // They are not read: the FP8 cache scales each token and kv head by its own range, which is
  // never less accurate than one calibrated scale per tensor (docs/quantization.md).
  bool kv_cache_scales = false;
  // The KV cache holds e4m3 values with a scale per token and kv head (ops/paged_kv.h) instead
  // of the compute dtype: what a checkpoint with an FP8 KV-cache scheme asks for, or
  // --kv-cache-dtype fp8. Independent of `method` (bf16 weights may use an FP8 cache).
  bool fp8_kv_cache = false;

  bool enabled() const { return method != Method::kNone; }
  // Whether the linear module `module` (its weight's name without ".weight") is quantized.
  // The embedding and the LM head never are unless a format says so (none does today).
  bool quantizes(std::string_view module) const;
  // "fp8 (compressed-tensors): weights per channel, activations dynamic per token, KV cache
  // fp8", for logs ("none" for neither).
  std::string describe() const;

  // From config.json and, when the directory has one, hf_quant_config.json (null otherwise).
  // Method kNone when neither declares a quantization. Throws Error(kUnsupported /
  // kInvalidFile) naming the file, key and value of what is not supported or malformed.
  static Quantization from_hf(const nlohmann::json& config, const nlohmann::json* hf_quant_config);
  // Online FP8: what `--quantization NAME` applies to an unquantized checkpoint (or dummy
  // weights), weight scales computed at load as a quantization tool would store them, source
  // "online":
  //   fp8, fp8-channel  one scale per output channel, activations dynamic per token (the default)
  //   fp8-tensor        one scale per stored tensor (the parts of a fused q/k/v or gate/up keep
  //                     their own), activations dynamic per token: the GEMMs take per-tensor
  //                     weights with dynamic activations as per-channel scales (linear_loader.h)
  //   fp8-block         128 x 128 weight blocks, activations dynamic per token and 128 columns
  //                     (the DeepSeek / Qwen FP8 releases' scheme)
  static Quantization online_fp8(WeightScales weights = WeightScales::kChannel);
  // The online quantization `name` (above). Throws Error(kInvalidArgument) naming the
  // supported names.
  static Quantization online(std::string_view name);
  // The names online() takes, for flag checks and help texts.
  static const std::vector<std::string>& online_names();
};

}  // namespace inflight
