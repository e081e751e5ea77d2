// Quantization::from_hf on the three FP8 checkpoint dialects (compressed-tensors, native "fp8",
// ModelOpt), every refusal path (its code, and the key and value in the message), and the
// modules `ignore` leaves unquantized.
#include "formats/quantization.h"

#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "formats/model_config.h"

namespace inflight {
namespace {

using json = nlohmann::json;
using W = Quantization::WeightScales;
using A = Quantization::ActivationScales;

// config.json of compressed-tensors FP8_DYNAMIC as llm-compressor writes it.
json ct_dynamic() {
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

json native_block() {
  return json::parse(R"({"quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
    "activation_scheme": "dynamic", "weight_block_size": [128, 128]}})");
}

json modelopt_file() {
  return json::parse(R"({"producer": {"name": "modelopt", "version": "0.19.0"},
    "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8",
                     "exclude_modules": ["lm_head", "model.layers.*.mlp.gate"]}})");
}

Quantization parse(const json& config, const json* hf_quant = nullptr) {
  return Quantization::from_hf(config, hf_quant);
}

// from_hf on `config` with `edit` applied must throw `code` with every needle in the message.
void expect_refused(json config, const std::function<void(json&)>& edit, ErrorCode code,
                    const std::vector<std::string>& needles, const json* hf_quant = nullptr) {
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

json& group0(json& c) { return c["quantization_config"]["config_groups"]["group_0"]; }

TEST(Quantization, NoneWithoutConfig) {
  const Quantization q = parse(json::parse(R"({"hidden_size": 8})"));
  EXPECT_FALSE(q.enabled());
  EXPECT_FALSE(q.quantizes("model.layers.0.mlp.down_proj"));
  EXPECT_EQ(q.describe(), "none");
  EXPECT_FALSE(parse(json::parse(R"({"quantization_config": null})")).enabled());
  const json null_quant = nullptr;
  EXPECT_FALSE(parse(json::object(), &null_quant).enabled());
}

TEST(Quantization, CompressedTensorsDynamic) {
  const Quantization q = parse(ct_dynamic());
  EXPECT_EQ(q.method, Quantization::Method::kFp8);
  EXPECT_EQ(q.source, "compressed-tensors");
  EXPECT_EQ(q.weights, W::kChannel);
  EXPECT_EQ(q.activations, A::kDynamicToken);
  EXPECT_EQ(q.ignore, std::vector<std::string>{"lm_head"});
  EXPECT_FALSE(q.kv_cache_scales);
  EXPECT_EQ(q.describe(),
            "fp8 (compressed-tensors): weights per channel, activations dynamic per token, 1 "
            "ignore entries");
  // Dynamic per-tensor activations run per token.
  json c = ct_dynamic();
  group0(c)["input_activations"]["strategy"] = "tensor";
  EXPECT_EQ(parse(c).activations, A::kDynamicToken);
}

TEST(Quantization, CompressedTensorsStaticWithKvCache) {
  json c = ct_dynamic();
  group0(c)["weights"]["strategy"] = "tensor";
  group0(c)["input_activations"]["strategy"] = "tensor";
  group0(c)["input_activations"]["dynamic"] = false;
  c["quantization_config"]["kv_cache_scheme"] = {
      {"type", "float"}, {"num_bits", 8}, {"strategy", "tensor"}, {"dynamic", false},
      {"symmetric", true}};
  const Quantization q = parse(c);
  EXPECT_EQ(q.weights, W::kTensor);
  EXPECT_EQ(q.activations, A::kStaticTensor);
  EXPECT_TRUE(q.kv_cache_scales);
  EXPECT_EQ(q.describe(),
            "fp8 (compressed-tensors): weights per tensor, activations static per tensor, "
            "KV-cache scales, 1 ignore entries");
}

TEST(Quantization, CompressedTensorsBlock) {
  json c = ct_dynamic();
  group0(c)["weights"]["strategy"] = "block";
  group0(c)["weights"]["block_structure"] = {128, 64};
  group0(c)["input_activations"]["strategy"] = "group";
  group0(c)["input_activations"]["group_size"] = 64;
  Quantization q = parse(c);
  EXPECT_EQ(q.weights, W::kBlock);
  EXPECT_EQ(q.block_rows, 128);
  EXPECT_EQ(q.block_cols, 64);
  EXPECT_EQ(q.activations, A::kDynamicGroup);
  EXPECT_EQ(q.describe(),
            "fp8 (compressed-tensors): weights in blocks of 128x64, activations dynamic per "
            "token and 64 columns, 1 ignore entries");
  group0(c)["weights"]["block_structure"] = "128x128";  // older compressed-tensors
  group0(c)["input_activations"]["group_size"] = 128;
  q = parse(c);
  EXPECT_EQ(q.block_rows, 128);
  EXPECT_EQ(q.block_cols, 128);
}

TEST(Quantization, NativeFp8) {
  Quantization q = parse(native_block());
  EXPECT_EQ(q.source, "fp8");
  EXPECT_EQ(q.weights, W::kBlock);
  EXPECT_EQ(q.block_rows, 128);
  EXPECT_EQ(q.block_cols, 128);
  EXPECT_EQ(q.activations, A::kDynamicGroup);
  json c = json::parse(R"({"quantization_config": {"quant_method": "fp8",
      "activation_scheme": "static", "ignored_layers": ["re:.*\\.mlp\\.down_proj"],
      "modules_to_not_convert": ["lm_head"]}})");
  q = parse(c);
  EXPECT_EQ(q.weights, W::kTensor);
  EXPECT_EQ(q.activations, A::kStaticTensor);
  EXPECT_EQ(q.ignore, (std::vector<std::string>{"lm_head", "re:.*\\.mlp\\.down_proj"}));
  c["quantization_config"]["activation_scheme"] = "dynamic";
  EXPECT_EQ(parse(c).activations, A::kDynamicToken);
}

TEST(Quantization, ModelOpt) {
  const json file = modelopt_file();
  Quantization q = parse(json::object(), &file);
  EXPECT_EQ(q.source, "modelopt");
  EXPECT_EQ(q.weights, W::kTensor);
  EXPECT_EQ(q.activations, A::kStaticTensor);
  EXPECT_TRUE(q.kv_cache_scales);
  EXPECT_EQ(q.ignore.size(), 2u);
  // config.json's quantization_config form, without KV-cache scales.
  q = parse(json::parse(R"({"quantization_config": {"quant_method": "modelopt",
      "quant_algo": "FP8", "kv_cache_quant_algo": null, "ignore": ["lm_head"]}})"));
  EXPECT_FALSE(q.kv_cache_scales);
  EXPECT_EQ(q.ignore, std::vector<std::string>{"lm_head"});
  // config.json's own quantization_config wins over hf_quant_config.json.
  EXPECT_EQ(parse(native_block(), &file).source, "fp8");
}

TEST(Quantization, OnlineFp8) {
  const Quantization q = Quantization::online_fp8();
  EXPECT_TRUE(q.enabled());
  EXPECT_EQ(q.source, "online");
  EXPECT_EQ(q.weights, W::kChannel);
  EXPECT_EQ(q.activations, A::kDynamicToken);
  EXPECT_TRUE(q.quantizes("model.layers.3.self_attn.o_proj"));
  EXPECT_FALSE(q.quantizes("lm_head"));
  EXPECT_FALSE(q.quantizes("model.embed_tokens"));
}

TEST(Quantization, IgnoreMatching) {
  Quantization q = Quantization::online_fp8();
  q.ignore = {"model.layers.0.mlp.down_proj", "re:.*layers\\.1\\..*_proj", "gate_proj",
              "model.layers.*.self_attn.o_proj"};
  EXPECT_FALSE(q.quantizes("model.layers.0.mlp.down_proj"));   // exact
  EXPECT_TRUE(q.quantizes("model.layers.2.mlp.down_proj"));
  EXPECT_FALSE(q.quantizes("model.layers.1.self_attn.q_proj"));  // regex, whole name
  EXPECT_TRUE(q.quantizes("model.layers.11.self_attn.q_proj"));
  EXPECT_FALSE(q.quantizes("model.layers.5.mlp.gate_proj"));     // last component
  EXPECT_TRUE(q.quantizes("model.layers.5.mlp.up_proj"));
  EXPECT_FALSE(q.quantizes("model.layers.7.self_attn.o_proj"));  // glob
  EXPECT_TRUE(q.quantizes("model.layers.7.self_attn.k_proj"));
  q.ignore = {"re:layers\\.1"};  // a regex must match the whole name, not a part
  EXPECT_TRUE(q.quantizes("model.layers.1.mlp.up_proj"));
  q.ignore = {"mlp.up_proj"};  // a dotted entry is a name, not a last component
  EXPECT_TRUE(q.quantizes("model.layers.1.mlp.up_proj"));
}

TEST(QuantizationRefused, CompressedTensors) {
  const auto U = ErrorCode::kUnsupported;
  const std::string g = "quantization_config.config_groups.group_0.";
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["weights"]["num_bits"] = 4; }, U,
                 {"config.json: " + g + "weights.num_bits is 4; only 8-bit float (FP8 e4m3) "
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
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["input_activations"]["num_bits"] = 16; },
                 U, {g + "input_activations.num_bits is 16"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["input_activations"]["type"] = "int"; },
                 U, {g + "input_activations.type is \"int\""});
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
  expect_refused(ct_dynamic(),
                 [](json& c) { group0(c)["input_activations"]["dynamic"] = "local"; }, U,
                 {g + "input_activations.dynamic is \"local\""});
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
                 [](json& c) {
                   c["quantization_config"]["config_groups"]["group_1"] = group0(c);
                 },
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
  expect_refused(ct_dynamic(),
                 [](json& c) {
                   c["quantization_config"]["kv_cache_scheme"] = {
                       {"type", "float"}, {"num_bits", 8}, {"strategy", "tensor"},
                       {"dynamic", true}};
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
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["input_activations"]["dynamic"] = 1; },
                 I, {g + "input_activations.dynamic must be true or false"});
  expect_refused(ct_dynamic(), [](json& c) { group0(c)["targets"] = "Linear"; }, I,
                 {g + "targets must be a list of strings"});
  expect_refused(ct_dynamic(), [](json& c) { c["quantization_config"]["ignore"] = {"a", 3}; }, I,
                 {"quantization_config.ignore[1] must be a string, found 3"});
  expect_refused(ct_dynamic(),
                 [](json& c) { c["quantization_config"]["ignore"] = {"re:model.(layers"}; }, I,
                 {"quantization_config.ignore", "'re:model.(layers' is not a valid regular"});
  expect_refused(ct_dynamic(),
                 [](json& c) { c["quantization_config"]["config_groups"] = json::object(); }, I,
                 {"quantization_config.config_groups is empty"});
  expect_refused(ct_dynamic(), [](json& c) { c["quantization_config"].erase("config_groups"); },
                 I, {"quantization_config.config_groups is missing"});
  for (const json& bad : {json{128}, json{128, 0}, json{128, "a"}, json("128by128"),
                          json("128x")}) {
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
    expect_refused(json::object(),
                   [&](json& c) {
                     c["quantization_config"] = {{"quant_method", method}, {"bits", 4}};
                   },
                   ErrorCode::kUnsupported,
                   {"config.json: quantization_config.quant_method is \"" + std::string(method) +
                    "\""});
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
                 [](json& c) { c["quantization_config"]["weight_block_size"] = {128, 128, 1}; },
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
    expect_refused(json::object(), [](json&) {}, code, needles, &file);
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
  expect_refused(json::object(),
                 [](json& c) {
                   c["quantization_config"] = {{"quant_method", "modelopt"},
                                               {"quant_algo", "INT4_AWQ"}};
                 },
                 U, {"config.json: quantization_config.quant_algo is \"INT4_AWQ\""});
}

// ModelConfig::from_hf_json reads quantization_config with the rest of config.json.
TEST(Quantization, InModelConfig) {
  json c = json::parse(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 32,
      "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
      "num_attention_heads": 2, "max_position_embeddings": 64})");
  c["quantization_config"] = ct_dynamic()["quantization_config"];
  EXPECT_EQ(ModelConfig::from_hf_json(c).quantization.weights, W::kChannel);
  c.erase("quantization_config");
  EXPECT_FALSE(ModelConfig::from_hf_json(c).quantization.enabled());
  c["quantization_config"] = {{"quant_method", "awq"}};
  EXPECT_THROW(ModelConfig::from_hf_json(c), Error);
}

}  // namespace
}  // namespace inflight
