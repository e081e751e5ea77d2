// Quantization::from_hf refusing what it does not run (kUnsupported) and malformed configs
// (kInvalidFile): every path, with the file, key and value in the message.
#include "formats/quantization.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "quantization_configs.h"

namespace inflight {
namespace {

using namespace testing;  // NOLINT: the config helpers
using W = Quantization::WeightScales;
using A = Quantization::ActivationScales;

TEST(QuantizationRefused, CompressedTensors) {
  const auto U = ErrorCode::kUnsupported;
  const std::string g = "quantization_config.config_groups.group_0.";
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["weights"]["num_bits"] = 4; }, U,
                 {"config.json: " + g +
                  "weights.num_bits is 4; only 8-bit float (FP8 e4m3) "
                  "weights are supported"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["weights"]["type"] = "int"; }, U,
                 {g + "weights.type is \"int\""});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["weights"]["strategy"] = "group"; }, U,
                 {g + "weights.strategy is \"group\""});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["weights"]["symmetric"] = false; }, U,
                 {g + "weights.symmetric is false"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["weights"]["dynamic"] = true; }, U,
                 {g + "weights.dynamic is true"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["weights"]["actorder"] = "group"; }, U,
                 {g + "weights.actorder"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["weights"] = nullptr; }, U,
                 {g + "weights is null"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["input_activations"] = nullptr; }, U,
                 {g + "input_activations is null", "weight-only FP8"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c).erase("input_activations"); }, U,
                 {g + "input_activations", "weight-only FP8"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["input_activations"]["num_bits"] = 16; }, U,
                 {g + "input_activations.num_bits is 16"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["input_activations"]["type"] = "int"; }, U,
                 {g + "input_activations.type is \"int\""});
  expect_refused(ct_dynamic(),
                 [](json& c) { group0(c)["input_activations"]["strategy"] = "channel"; }, U,
                 {g + "input_activations.strategy is \"channel\""});
  expect_refused(ct_dynamic(),  // group activations need block weights
                 [](json& c) { group0(c)["input_activations"]["strategy"] = "group"; }, U,
                 {g + "input_activations.strategy is \"group\""});
  expect_refused(ct_dynamic(),
                 [](json& c) {
                   group0(c)["input_activations"]["dynamic"] = false;  // static per token
                 },
                 U, {g + "input_activations.strategy is \"token\"", "static"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["input_activations"]["dynamic"] = "local"; },
                 U, {g + "input_activations.dynamic is \"local\""});
  expect_refused(ct_dynamic(),
                 [](json& c) {
                   group0(c)["weights"]["strategy"] = "block";
                   group0(c)["weights"]["block_structure"] = {128, 128};
                   group0(c)["input_activations"]["strategy"] = "group";
                   group0(c)["input_activations"]["group_size"] = 64;
                 },
                 U, {g + "input_activations.group_size is 64"});
  expect_refused(ct_dynamic(),
                 [](json& c) { group0(c)["output_activations"] = group0(c)["weights"]; }, U,
                 {g + "output_activations is {"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["targets"] = {"re:.*q_proj"}; }, U,
                 {g + "targets is [\"re:.*q_proj\"]"});
  expect_refused(ct_dynamic(),
                 [](json& c) { c["quantization_config"]["config_groups"]["group_1"] = group0(c); },
                 U, {"quantization_config.config_groups has 2 groups"});
  expect_refused(ct_dynamic(),
                 [](json& c) { c["quantization_config"]["format"] = "pack-quantized"; }, U,
                 {"quantization_config.format is \"pack-quantized\""});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["format"] = "int-quantized"; }, U,
                 {g + "format is \"int-quantized\""});
  expect_refused(ct_dynamic(),
                 [](json& c) {
                   c["quantization_config"]["sparsity_config"] = {{"format", "sparse-24-bitmask"}};
                 },
                 U, {"quantization_config.sparsity_config.format is \"sparse-24-bitmask\""});
  expect_refused(ct_dynamic(),
                 [](json& c) {
                   c["quantization_config"]["transform_config"] = {{"config_groups", {{"u", 1}}}};
                 },
                 U, {"quantization_config.transform_config is {"});
  expect_refused(ct_dynamic(),
                 [](json& c) {
                   c["quantization_config"]["kv_cache_scheme"] = {
                       {"type", "float"}, {"num_bits", 8}, {"strategy", "attn_head"}};
                 },
                 U, {"quantization_config.kv_cache_scheme.strategy is \"attn_head\""});
  expect_refused(ct_dynamic(),
                 [](json& c) {
                   c["quantization_config"]["kv_cache_scheme"] = {
                       {"type", "int"}, {"num_bits", 8}, {"strategy", "tensor"}};
                 },
                 U, {"quantization_config.kv_cache_scheme.type is \"int\""});
  expect_refused(
      ct_dynamic(),
      [](json& c) {
        c["quantization_config"]["kv_cache_scheme"] = {
            {"type", "float"}, {"num_bits", 8}, {"strategy", "tensor"}, {"dynamic", true}};
      },
      U, {"quantization_config.kv_cache_scheme.dynamic is true"});
}

TEST(QuantizationRefused, MalformedCompressedTensors) {
  const auto I = ErrorCode::kInvalidFile;
  const std::string g = "quantization_config.config_groups.group_0.";
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["weights"]["num_bits"] = "8"; }, I,
                 {"config.json: " + g + "weights.num_bits must be an integer, found \"8\""});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["weights"].erase("strategy"); }, I,
                 {g + "weights.strategy is missing"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["weights"] = 8; }, I,
                 {g + "weights must be an object"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["input_activations"]["dynamic"] = 1; }, I,
                 {g + "input_activations.dynamic must be true or false"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["targets"] = "Linear"; }, I,
                 {g + "targets must be a list of strings"});
  expect_refused(ct_dynamic(),
                 [](json& c) {
                   c["quantization_config"]["ignore"] = {"a", 3};
                 },
                 I, {"quantization_config.ignore[1] must be a string, found 3"});
  expect_refused(ct_dynamic(),
                 [](json& c) { c["quantization_config"]["ignore"] = {"re:model.(layers"}; }, I,
                 {"quantization_config.ignore", "'re:model.(layers' is not a valid regular"});
  expect_refused(ct_dynamic(),
                 [](json& c) { c["quantization_config"]["config_groups"] = json::object(); }, I,
                 {"quantization_config.config_groups is empty"});
  expect_refused(ct_dynamic(), [](json& c) { c["quantization_config"].erase("config_groups"); }, I,
                 {"quantization_config.config_groups is missing"});
  for (const json& bad :
       {json{128}, json{128, 0}, json{128, "a"}, json("128by128"), json("128x")}) {
    expect_refused(ct_dynamic(),
                   [&](json& c) {
                     group0(c)["weights"]["strategy"] = "block";
                     group0(c)["weights"]["block_structure"] = bad;
                   },
                   I, {g + "weights.block_structure"});
  }
  expect_refused(ct_dynamic(), [](json& c) { c["quantization_config"] = "fp8"; }, I,
                 {"quantization_config must be an object"});
  expect_refused(ct_dynamic(), [](json& c) { c["quantization_config"].erase("quant_method"); }, I,
                 {"quantization_config.quant_method is missing"});
  expect_refused(ct_dynamic(), [](json& c) { c["quantization_config"]["quant_method"] = 1; }, I,
                 {"quantization_config.quant_method must be a string"});
}

TEST(QuantizationRefused, OtherMethods) {
  for (const char* method : {"awq", "gptq", "bitsandbytes", "fbgemm_fp8", "mxfp4"}) {
    expect_refused(
        json::object(),
        [&](json& c) {
          c["quantization_config"] = {{"quant_method", method}, {"bits", 4}};
        },
        ErrorCode::kUnsupported,
        {"config.json: quantization_config.quant_method is \"" + std::string(method) + "\""});
  }
}

TEST(QuantizationRefused, NativeFp8) {
  const auto U = ErrorCode::kUnsupported;
  expect_refused(native_block(), [](json& c) { c["quantization_config"]["fmt"] = "e5m2"; }, U,
                 {"quantization_config.fmt is \"e5m2\""});
  expect_refused(native_block(),
                 [](json& c) { c["quantization_config"]["activation_scheme"] = "static"; }, U,
                 {"quantization_config.activation_scheme is \"static\"", "block"});
  expect_refused(native_block(),
                 [](json& c) { c["quantization_config"]["activation_scheme"] = "per_token"; }, U,
                 {"quantization_config.activation_scheme is \"per_token\""});
  expect_refused(native_block(),
                 [](json& c) {
                   c["quantization_config"]["weight_block_size"] = {128, 128, 1};
                 },
                 ErrorCode::kInvalidFile, {"quantization_config.weight_block_size must be"});
  expect_refused(native_block(),
                 [](json& c) { c["quantization_config"]["modules_to_not_convert"] = "lm_head"; },
                 ErrorCode::kInvalidFile, {"quantization_config.modules_to_not_convert must be"});
  expect_refused(native_block(),
                 [](json& c) { c["quantization_config"]["ignored_layers"] = {"re:[a-"}; },
                 ErrorCode::kInvalidFile, {"quantization_config.ignored_layers", "'re:[a-'"});
}

TEST(QuantizationRefused, ModelOpt) {
  const auto U = ErrorCode::kUnsupported;
  const auto refused_file = [&](const std::function<void(json&)>& edit, ErrorCode code,
                                const std::vector<std::string>& needles) {
    json file = modelopt_file();
    edit(file);
    expect_refused(
        json::object(), [](json&) {}, code, needles, &file);
  };
  refused_file([](json& f) { f["quantization"]["quant_algo"] = "NVFP4"; }, U,
               {"hf_quant_config.json: quantization.quant_algo is \"NVFP4\""});
  refused_file([](json& f) { f["quantization"]["quant_algo"] = "W4A8_AWQ"; }, U,
               {"quantization.quant_algo is \"W4A8_AWQ\""});
  refused_file([](json& f) { f["quantization"]["quant_algo"] = nullptr; }, U,
               {"quantization.quant_algo is null", "KV-cache-only"});
  refused_file([](json& f) { f["quantization"]["kv_cache_quant_algo"] = "NVFP4"; }, U,
               {"hf_quant_config.json: quantization.kv_cache_quant_algo is \"NVFP4\""});
  refused_file([](json& f) { f["quantization"]["exclude_modules"] = 3; }, ErrorCode::kInvalidFile,
               {"quantization.exclude_modules must be a list of strings"});
  refused_file([](json& f) { f.erase("quantization"); }, ErrorCode::kInvalidFile,
               {"hf_quant_config.json: quantization is missing"});
  refused_file([](json& f) { f = json::array(); }, ErrorCode::kInvalidFile,
               {"hf_quant_config.json: top level must be an object"});
  expect_refused(
      json::object(),
      [](json& c) {
        c["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", "INT4_AWQ"}};
      },
      U, {"config.json: quantization_config.quant_algo is \"INT4_AWQ\""});
}

}  // namespace
}  // namespace inflight
