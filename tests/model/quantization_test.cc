// Quantization::from_hf on the three FP8 checkpoint dialects (compressed-tensors, native "fp8",
// ModelOpt) as their tools write them, online FP8, and the modules `ignore` leaves unquantized.
#include "formats/quantization.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "formats/model_config.h"
#include "quantization_configs.h"

namespace inflight {
namespace {

using namespace testing;  // NOLINT: the config helpers
using W = Quantization::WeightScales;
using A = Quantization::ActivationScales;

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
  c["quantization_config"]["kv_cache_scheme"] = {{"type", "float"},
                                                 {"num_bits", 8},
                                                 {"strategy", "tensor"},
                                                 {"dynamic", false},
                                                 {"symmetric", true}};
  const Quantization q = parse(c);
  EXPECT_EQ(q.weights, W::kTensor);
  EXPECT_EQ(q.activations, A::kStaticTensor);
  EXPECT_TRUE(q.kv_cache_scales);
  EXPECT_TRUE(q.fp8_kv_cache);  // --kv-cache-dtype auto follows the checkpoint
  EXPECT_EQ(q.describe(),
            "fp8 (compressed-tensors): weights per tensor, activations static per tensor, "
            "1 ignore entries, KV cache fp8 e4m3 with a scale per token and kv head (the "
            "checkpoint's static k_scale/v_scale are not used)");
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

TEST(Quantization, OnlineSchemesByName) {
  EXPECT_EQ(Quantization::online("fp8").weights, W::kChannel);  // the default
  const Quantization channel = Quantization::online("fp8-channel");
  EXPECT_EQ(channel.weights, W::kChannel);
  EXPECT_EQ(channel.activations, A::kDynamicToken);
  const Quantization tensor = Quantization::online("fp8-tensor");
  EXPECT_EQ(tensor.weights, W::kTensor);
  EXPECT_EQ(tensor.activations, A::kDynamicToken);  // the GEMMs have no dynamic per-tensor x
  const Quantization block = Quantization::online("fp8-block");
  EXPECT_EQ(block.weights, W::kBlock);
  EXPECT_EQ(block.block_rows, 128);
  EXPECT_EQ(block.block_cols, 128);
  EXPECT_EQ(block.activations, A::kDynamicGroup);
  for (const std::string& name : Quantization::online_names()) {
    EXPECT_EQ(Quantization::online(name).source, "online") << name;
  }
  try {
    Quantization::online("int4");
    ADD_FAILURE() << "int4 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("fp8-block"), std::string::npos) << e.what();
  }
}

TEST(Quantization, IgnoreMatching) {
  Quantization q = Quantization::online_fp8();
  q.ignore = {"model.layers.0.mlp.down_proj", "re:.*layers\\.1\\..*_proj", "gate_proj",
              "model.layers.*.self_attn.o_proj"};
  EXPECT_FALSE(q.quantizes("model.layers.0.mlp.down_proj"));  // exact
  EXPECT_TRUE(q.quantizes("model.layers.2.mlp.down_proj"));
  EXPECT_FALSE(q.quantizes("model.layers.1.self_attn.q_proj"));  // regex, whole name
  EXPECT_TRUE(q.quantizes("model.layers.11.self_attn.q_proj"));
  EXPECT_FALSE(q.quantizes("model.layers.5.mlp.gate_proj"));  // last component
  EXPECT_TRUE(q.quantizes("model.layers.5.mlp.up_proj"));
  EXPECT_FALSE(q.quantizes("model.layers.7.self_attn.o_proj"));  // glob
  EXPECT_TRUE(q.quantizes("model.layers.7.self_attn.k_proj"));
  q.ignore = {"re:layers\\.1"};  // a regex must match the whole name, not a part
  EXPECT_TRUE(q.quantizes("model.layers.1.mlp.up_proj"));
  q.ignore = {"mlp.up_proj"};  // a dotted entry is a name, not a last component
  EXPECT_TRUE(q.quantizes("model.layers.1.mlp.up_proj"));
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
