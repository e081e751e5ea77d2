// Quantization configs for the tests: each format's config as its tool writes it, and a
// checker for the refusals (code, and the key and value in the message).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "formats/quantization.h"

namespace inflight::testing {

using json = nlohmann::json;

// config.json of compressed-tensors FP8_DYNAMIC as llm-compressor writes it.
inline json ct_dynamic() {
  return json::parse(R"({
    "quantization_config": {
      "quant_method": "compressed-tensors", "format": "float-quantized",
      "quantization_status": "compressed", "global_compression_ratio": 1.2,
      "config_groups": {"group_0": {
        "targets": ["Linear"],
        "weights": {"type": "float", "num_bits": 8, "strategy": "channel", "symmetric": true,
                    "dynamic": false, "group_size": null, "block_structure": null,
                    "actorder": null, "observer": "minmax", "observer_kwargs": {}},
        "input_activations": {"type": "float", "num_bits": 8, "strategy": "token",
                              "symmetric": true, "dynamic": true, "group_size": null,
                              "observer": null},
        "output_activations": null}},
      "ignore": ["lm_head"], "kv_cache_scheme": null, "sparsity_config": {}}})");
}

inline json native_block() {
  return json::parse(R"({"quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
    "activation_scheme": "dynamic", "weight_block_size": [128, 128]}})");
}

inline json modelopt_file() {
  return json::parse(R"({"producer": {"name": "modelopt", "version": "0.19.0"},
    "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8",
                     "exclude_modules": ["lm_head", "model.layers.*.mlp.gate"]}})");
}

inline Quantization parse(const json& config, const json* hf_quant = nullptr) {
  return Quantization::from_hf(config, hf_quant);
}

// from_hf on `config` with `edit` applied must throw `code` with every needle in the message.
inline void expect_refused(json config, const std::function<void(json&)>& edit, ErrorCode code,
                           const std::vector<std::string>& needles,
                           const json* hf_quant = nullptr) {
  edit(config);
  try {
    parse(config, hf_quant);
    ADD_FAILURE() << "accepted: " << config.dump();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& n : needles) {
      EXPECT_NE(e.message().find(n), std::string::npos) << "'" << n << "' not in: " << e.what();
    }
  }
}

inline json& group0(json& c) {
  return c["quantization_config"]["config_groups"]["group_0"];
}

}  // namespace inflight::testing
