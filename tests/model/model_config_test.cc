// ModelConfig::from_hf_json on real released configs, resolved by the architecture registry as
// the engine sees them, and validate() on broken ones.
#include "formats/model_config.h"

#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "model/registry.h"

namespace inflight {
namespace {

using json = nlohmann::json;

// config.json as the engine sees it: parsed, then resolved to its architecture's family.
ModelConfig parse(const json& j) {
  return resolve_architecture(ModelConfig::from_hf_json(j));
}

// meta-llama/Llama-3.1-8B-Instruct config.json
const char* kLlama31 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.42.3", "use_cache": true, "vocab_size": 128256})";

// Qwen/Qwen2.5-0.5B-Instruct config.json
const char* kQwen25 = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936})";

// mistralai/Mistral-7B-v0.1 config.json
const char* kMistral = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0",
  "use_cache": true, "vocab_size": 32000})";

// Qwen/Qwen3-8B config.json
const char* kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12288,
  "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
  "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// mistralai/Mixtral-8x7B-v0.1 config.json
const char* kMixtral = R"({
  "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
  "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": false,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.36.0.dev0", "use_cache": true, "vocab_size": 32000})";

// Qwen/Qwen3-30B-A3B config.json
const char* kQwen3Moe = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
  "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
  "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
  "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
  "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
  "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// mosaicml/mpt-7b config.json (init_config and auto_map left out)
const char* kMpt7b = R"({
  "architectures": ["MPTForCausalLM"],
  "attn_config": {"alibi": true, "alibi_bias_max": 8, "attn_impl": "torch", "attn_pdrop": 0,
                  "attn_type": "multihead_attention", "attn_uses_sequence_id": false,
                  "clip_qkv": null, "prefix_lm": false, "qk_ln": false, "softmax_scale": null},
  "d_model": 4096, "emb_pdrop": 0, "embedding_fraction": 1.0, "expansion_ratio": 4,
  "init_device": "cpu", "learned_pos_emb": true, "logit_scale": null, "max_seq_len": 2048,
  "model_type": "mpt", "n_heads": 32, "n_layers": 32, "no_bias": true,
  "norm_type": "low_precision_layernorm", "resid_pdrop": 0,
  "tokenizer_name": "EleutherAI/gpt-neox-20b", "torch_dtype": "bfloat16",
  "transformers_version": "4.28.1", "use_cache": false, "verbose": 0, "vocab_size": 50432})";

// Throws with `code` and a message containing `needle`.
void expect_hf_error(const json& j, ErrorCode code, const std::string& needle) {
  try {
    parse(j);
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, Llama31WithLlama3RopeScaling) {
  const ModelConfig c = parse(json::parse(kLlama31));
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.0f);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
}

TEST(ModelConfig, Qwen2HasBiasAndTiedEmbeddings) {
  const ModelConfig c = parse(json::parse(kQwen25));
  EXPECT_EQ(c.architecture, "qwen2");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.sliding_window, 0);  // use_sliding_window is false
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645}));
  json on = json::parse(kQwen25);
  on["use_sliding_window"] = true;
  expect_hf_error(on, ErrorCode::kUnsupported, "use_sliding_window");
}

TEST(ModelConfig, MistralSlidingWindow) {
  const ModelConfig c = parse(json::parse(kMistral));
  EXPECT_EQ(c.architecture, "mistral");
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2}));
  json v02 = json::parse(kMistral);
  v02["sliding_window"] = nullptr;  // Mistral v0.2+ turned it off
  EXPECT_EQ(parse(v02).sliding_window, 0);
}

TEST(ModelConfig, Qwen3HasQkNormsAndAnExplicitHeadDim) {
  const ModelConfig c = parse(json::parse(kQwen3));
  EXPECT_EQ(c.architecture, "qwen3");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_experts, 0);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.rope_theta, 1e6f);
}

TEST(ModelConfig, MixtralExperts) {
  const ModelConfig c = parse(json::parse(kMixtral));
  EXPECT_EQ(c.architecture, "mixtral");
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_token, 2);
  EXPECT_EQ(c.expert_intermediate_size(), 14336);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.sliding_window, 0);  // null
  json windowed = json::parse(kMixtral);
  windowed["sliding_window"] = 4096;
  EXPECT_EQ(parse(windowed).sliding_window, 4096);
  json dense = json::parse(kMixtral);
  dense.erase("num_local_experts");
  expect_hf_error(dense, ErrorCode::kInvalidFile, "mixture of experts");
  json too_many = json::parse(kMixtral);
  too_many["num_experts_per_tok"] = 9;
  expect_hf_error(too_many, ErrorCode::kInvalidFile, "9 per token");
}

TEST(ModelConfig, Qwen3MoeExperts) {
  const ModelConfig c = parse(json::parse(kQwen3Moe));
  EXPECT_EQ(c.architecture, "qwen3_moe");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_token, 8);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_EQ(c.expert_intermediate_size(), 768);
  EXPECT_TRUE(c.norm_topk_prob);
  json no_key = json::parse(kQwen3Moe);
  no_key.erase("norm_topk_prob");
  EXPECT_FALSE(parse(no_key).norm_topk_prob);  // transformers' Qwen3-MoE default
  json dense_layers = json::parse(kQwen3Moe);
  dense_layers["mlp_only_layers"] = {0, 47};
  expect_hf_error(dense_layers, ErrorCode::kUnsupported, "mlp_only_layers");
  json sparse_step = json::parse(kQwen3Moe);
  sparse_step["decoder_sparse_step"] = 2;
  expect_hf_error(sparse_step, ErrorCode::kUnsupported, "decoder_sparse_step");
}

TEST(ModelConfig, MptKeysAndDefaults) {
  const ModelConfig c = parse(json::parse(kMpt7b));
  EXPECT_EQ(c.architecture, "mpt");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.intermediate_size, 16384);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.vocab_size, 50432);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_EQ(c.norm, ModelConfig::Norm::kLayer);
  EXPECT_EQ(c.positions, ModelConfig::Positions::kAlibi);
  EXPECT_EQ(c.mlp, ModelConfig::Mlp::kGelu);
  EXPECT_FLOAT_EQ(c.alibi_bias_max, 8.0f);
  EXPECT_FALSE(c.attention_bias || c.o_proj_bias || c.mlp_bias || c.norm_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.clip_qkv, 0.0f);
  EXPECT_EQ(c.attention_scale, 0.0f);
  EXPECT_EQ(c.logit_scale, 1.0f);

  json v = json::parse(kMpt7b);
  v["no_bias"] = false;
  v["attn_config"]["clip_qkv"] = 6;
  v["attn_config"]["softmax_scale"] = 0.1;
  v["logit_scale"] = "inv_sqrt_d_model";
  v["expansion_ratio"] = 2;
  const ModelConfig b = parse(v);
  EXPECT_TRUE(b.attention_bias && b.o_proj_bias && b.mlp_bias && b.norm_bias);
  EXPECT_FLOAT_EQ(b.clip_qkv, 6.0f);
  EXPECT_FLOAT_EQ(b.attention_scale, 0.1f);
  EXPECT_FLOAT_EQ(b.logit_scale, 1.0f / 64);
  EXPECT_EQ(b.intermediate_size, 8192);
  json scaled = json::parse(kMpt7b);
  scaled["logit_scale"] = 0.5;
  EXPECT_FLOAT_EQ(parse(scaled).logit_scale, 0.5f);
}

TEST(ModelConfig, MptVariantsRefusedByKeyAndValue) {
  const auto with = [](const std::function<void(json&)>& change) {
    json j = json::parse(kMpt7b);
    change(j);
    return j;
  };
  const auto attn = [&](const char* key, json value) {
    return with([&](json& j) { j["attn_config"][key] = value; });
  };
  expect_hf_error(attn("attn_type", "multiquery_attention"), ErrorCode::kUnsupported,
                  "attn_config.attn_type = \"multiquery_attention\"");
  expect_hf_error(attn("prefix_lm", true), ErrorCode::kUnsupported, "attn_config.prefix_lm = true");
  expect_hf_error(attn("qk_ln", true), ErrorCode::kUnsupported, "attn_config.qk_ln = true");
  expect_hf_error(attn("alibi", false), ErrorCode::kUnsupported, "attn_config.alibi = false");
  expect_hf_error(attn("rope", true), ErrorCode::kUnsupported, "attn_config.rope = true");
  expect_hf_error(attn("sliding_window_size", 1024), ErrorCode::kUnsupported,
                  "attn_config.sliding_window_size = 1024");
  expect_hf_error(attn("clip_qkv", "6"), ErrorCode::kInvalidFile, "attn_config.clip_qkv");
  expect_hf_error(attn("softmax_scale", -1.0), ErrorCode::kInvalidFile,
                  "attn_config.softmax_scale");
  expect_hf_error(with([](json& j) { j["norm_type"] = "rmsnorm"; }), ErrorCode::kUnsupported,
                  "norm_type = \"rmsnorm\"");
  expect_hf_error(with([](json& j) {
                    j["ffn_config"] = {{"ffn_type", "mptglu"}};
                  }),
                  ErrorCode::kUnsupported, "ffn_config.ffn_type = \"mptglu\"");
  expect_hf_error(with([](json& j) { j["logit_scale"] = "one"; }), ErrorCode::kInvalidFile,
                  "logit_scale");
  expect_hf_error(with([](json& j) { j.erase("d_model"); }), ErrorCode::kInvalidFile, "d_model");
  expect_hf_error(with([](json& j) { j["n_heads"] = 5; }), ErrorCode::kInvalidFile, "n_heads 5");
}

TEST(ModelConfig, ExplicitHeadDimAndDefaults) {
  json j = json::parse(kMistral);  // Mistral-Nemo shape: head_dim != hidden / heads
  j["hidden_size"] = 5120;
  j["head_dim"] = 128;
  EXPECT_EQ(parse(j).head_dim, 128);
  j.erase("head_dim");
  j["num_attention_heads"] = 48;  // 5120 / 48 is not whole
  expect_hf_error(j, ErrorCode::kInvalidFile, "not divisible");
  json k = json::parse(kLlama31);
  k.erase("num_key_value_heads");
  k.erase("rope_theta");
  k["rope_scaling"] = nullptr;
  k["eos_token_id"] = 7;
  const ModelConfig c = parse(k);
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{7}));
}

TEST(ModelConfig, LinearRopeScaling) {
  json j = json::parse(kLlama31);
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_EQ(c.rope_scaling.factor, 2.0f);
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_hf_error(j, ErrorCode::kUnsupported, "'yarn'");
  j["rope_scaling"] = {{"rope_type", "linear"}};
  expect_hf_error(j, ErrorCode::kInvalidFile, "needs a 'factor'");
}

// transformers >= 5 writes theta and scaling under "rope_parameters" only.
TEST(ModelConfig, RopeParametersOfTransformers5) {
  json j = json::parse(kLlama31);
  j["rope_parameters"] = j["rope_scaling"];
  j["rope_parameters"]["rope_theta"] = 500000.0;
  j.erase("rope_scaling");
  j.erase("rope_theta");
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_EQ(c.rope_scaling.factor, 8.0f);
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  const ModelConfig d = parse(j);
  EXPECT_EQ(d.rope_theta, 1000000.0f);
  EXPECT_EQ(d.rope_scaling.type, RopeScaling::Type::kNone);
}

TEST(ModelConfig, RejectsUnknownArchitectureAndBadTypes) {
  json j = json::parse(kLlama31);
  j["architectures"] = {"GPT2LMHeadModel"};
  expect_hf_error(j, ErrorCode::kUnsupported, "'GPT2LMHeadModel'");
  j = json::parse(kLlama31);
  j["hidden_size"] = "4096";
  expect_hf_error(j, ErrorCode::kInvalidFile, "'hidden_size' must be an integer");
  j = json::parse(kLlama31);
  j["hidden_size"] = 4096.5;
  expect_hf_error(j, ErrorCode::kInvalidFile, "'hidden_size' must be an integer");
  j = json::parse(kLlama31);
  j.erase("vocab_size");
  expect_hf_error(j, ErrorCode::kInvalidFile, "'vocab_size' is missing");
  j = json::parse(kLlama31);
  j["eos_token_id"] = {128001, "x"};
  expect_hf_error(j, ErrorCode::kInvalidFile, "eos_token_id");
  j = json::parse(kLlama31);
  j["hidden_act"] = "gelu";
  expect_hf_error(j, ErrorCode::kUnsupported, "gelu");
  j = json::parse(kLlama31);
  j["tie_word_embeddings"] = 1;
  expect_hf_error(j, ErrorCode::kInvalidFile, "tie_word_embeddings");
  expect_hf_error(json::array(), ErrorCode::kInvalidFile, "JSON object");
}

TEST(ModelConfig, ValidateNamesTheField) {
  const ModelConfig good = parse(json::parse(kLlama31));
  const auto expect_invalid = [&](auto mutate, const std::string& needle) {
    ModelConfig c = good;
    mutate(c);
    try {
      c.validate();
      ADD_FAILURE() << "expected an error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_invalid([](ModelConfig& c) { c.num_kv_heads = 5; }, "not a multiple of num_kv_heads");
  expect_invalid([](ModelConfig& c) { c.hidden_size = 0; }, "hidden_size must be positive");
  expect_invalid([](ModelConfig& c) { c.num_layers = -1; }, "num_layers");
  expect_invalid([](ModelConfig& c) { c.head_dim = 127; }, "head_dim 127 must be even");
  expect_invalid([](ModelConfig& c) { c.rms_norm_eps = 0; }, "rms_norm_eps");
  expect_invalid([](ModelConfig& c) { c.rope_theta = -1; }, "rope_theta");
  expect_invalid([](ModelConfig& c) { c.rope_scaling.factor = 0; }, "rope_scaling factor");
  expect_invalid([](ModelConfig& c) { c.rope_scaling.high_freq_factor = 0.5f; },
                 "high_freq_factor");
  expect_invalid([](ModelConfig& c) { c.eos_token_ids = {200000}; }, "eos_token_id 200000");
  expect_invalid([](ModelConfig& c) { c.bos_token_id = -5; }, "bos_token_id");
  expect_invalid([](ModelConfig& c) { c.sliding_window = -1; }, "sliding_window");
  EXPECT_NO_THROW(good.validate());
}

// Sizes no real model has are refused by name before anything is allocated from them (they
// used to reach the allocator and print only std::bad_alloc).
TEST(ModelConfig, AbsurdSizesAreRefusedByName) {
  const auto expect_refused = [](const char* key, int64_t value, const std::string& needle) {
    json j = json::parse(kLlama31);
    j[key] = value;
    expect_hf_error(j, ErrorCode::kInvalidFile, needle);
  };
  expect_refused("num_hidden_layers", 1'000'000'000'000,
                 "num_layers (num_hidden_layers) is "
                 "1000000000000, more than 2^31 - 1");
  expect_refused("hidden_size", int64_t{1} << 40, "hidden_size is 1099511627776");
  expect_refused("vocab_size", int64_t{1} << 33, "vocab_size is 8589934592");
  expect_refused("intermediate_size", int64_t{1} << 31, "intermediate_size is 2147483648");
  expect_refused("num_key_value_heads", int64_t{1} << 32, "num_kv_heads (num_key_value_heads)");
  expect_refused("max_position_embeddings", int64_t{1} << 50, "max_position_embeddings");
  // Every dimension allowed, their products not: named by what they multiply to.
  json j = json::parse(kLlama31);
  j["num_hidden_layers"] = 1'000'000'000;
  j["intermediate_size"] = 2'000'000'000;
  expect_hf_error(j, ErrorCode::kInvalidFile, "num_hidden_layers x one layer's weights");
  j = json::parse(kLlama31);
  j["head_dim"] = 128;
  j["hidden_size"] = INT32_MAX;
  j["intermediate_size"] = INT32_MAX;
  expect_hf_error(j, ErrorCode::kInvalidFile, "MLP: 3 x intermediate_size x hidden_size");
  j = json::parse(kLlama31);
  j["num_hidden_layers"] = 2'000'000'000;
  j["intermediate_size"] = 100'000;
  expect_hf_error(j, ErrorCode::kInvalidFile, "is more than 2^60");
  j["num_hidden_layers"] = 200'000;  // representable; the device check refuses it at load
  EXPECT_GT(parse(j).num_weight_elements(), int64_t{1} << 40);
}

}  // namespace
}  // namespace inflight
