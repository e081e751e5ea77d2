#include "model/arch_presets.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace inflight {

namespace {

ModelConfig llama31(int64_t hidden, int64_t inter, int64_t layers, int64_t heads) {
  ModelConfig c;
  c.architecture = "llama";
  c.vocab_size = 128256;
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.max_position_embeddings = 131072;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  c.rope_scaling.type = RopeScaling::Type::kLlama3;
  c.rope_scaling.factor = 8.0f;
  c.rope_scaling.low_freq_factor = 1.0f;
  c.rope_scaling.high_freq_factor = 4.0f;
  c.rope_scaling.original_max_position_embeddings = 8192;
  c.bos_token_id = 128000;
  c.eos_token_ids = {128001, 128008, 128009};
  return c;
}

// Qwen3 (dense and MoE): q/k norms, no biases, head_dim 128, 152k vocab.
ModelConfig qwen3(int64_t hidden, int64_t inter, int64_t layers, int64_t heads, int64_t kv_heads) {
  ModelConfig c;
  c.vocab_size = 151936;
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = 128;
  c.max_position_embeddings = 40960;
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = 1000000.0f;
  c.qk_norm = true;
  c.bos_token_id = 151643;
  c.eos_token_ids = {151645, 151643};
  return c;
}

// MPT: LayerNorm without biases, ALiBi (bias max 8), the GELU MLP of 4 d_model, heads of 128,
// tied embeddings, GPT-NeoX's vocabulary padded to 50432.
ModelConfig mpt(int64_t d_model, int64_t layers, int64_t heads, int64_t max_seq_len) {
  ModelConfig c;
  c.architecture = "mpt";
  c.vocab_size = 50432;
  c.hidden_size = d_model;
  c.intermediate_size = 4 * d_model;  // expansion_ratio 4
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = heads;
  c.head_dim = d_model / heads;
  c.max_position_embeddings = max_seq_len;
  c.rms_norm_eps = 1e-5f;  // layer_norm_epsilon
  c.norm = ModelConfig::Norm::kLayer;
  c.positions = ModelConfig::Positions::kAlibi;
  c.alibi_bias_max = 8.0f;
  c.mlp = ModelConfig::Mlp::kGelu;
  c.tie_word_embeddings = true;
  c.bos_token_id = 0;  // GPT-NeoX's <|endoftext|>
  c.eos_token_ids = {0};
  return c;
}

struct Preset {
  const char* name;
  ModelConfig (*make)();
};

const Preset kPresets[] = {
    {"llama-3.1-8b",
     [] {
       ModelConfig c = llama31(4096, 14336, 32, 32);
       c.name = "Llama-3.1-8B (dummy weights)";
       return c;
     }},
    {"llama-3.1-70b",
     [] {
       ModelConfig c = llama31(8192, 28672, 80, 64);
       c.name = "Llama-3.1-70B (dummy weights)";
       return c;
     }},
    {"qwen2.5-7b",
     [] {
       ModelConfig c;
       c.architecture = "qwen2";
       c.name = "Qwen2.5-7B (dummy weights)";
       c.vocab_size = 152064;
       c.hidden_size = 3584;
       c.intermediate_size = 18944;
       c.num_layers = 28;
       c.num_heads = 28;
       c.num_kv_heads = 4;
       c.head_dim = 128;
       c.max_position_embeddings = 32768;
       c.rms_norm_eps = 1e-6f;
       c.rope_theta = 1000000.0f;
       c.attention_bias = true;
       c.bos_token_id = 151643;
       c.eos_token_ids = {151643};
       return c;
     }},
    {"mistral-7b",
     [] {
       ModelConfig c;
       c.architecture = "mistral";
       c.name = "Mistral-7B-v0.1 (dummy weights)";
       c.vocab_size = 32000;
       c.hidden_size = 4096;
       c.intermediate_size = 14336;
       c.num_layers = 32;
       c.num_heads = 32;
       c.num_kv_heads = 8;
       c.head_dim = 128;
       c.max_position_embeddings = 32768;
       c.rms_norm_eps = 1e-5f;
       c.rope_theta = 10000.0f;
       c.sliding_window = 4096;
       c.bos_token_id = 1;
       c.eos_token_ids = {2};
       return c;
     }},
    {"qwen3-8b",
     [] {
       ModelConfig c = qwen3(4096, 12288, 36, 32, 8);
       c.architecture = "qwen3";
       c.name = "Qwen3-8B (dummy weights)";
       return c;
     }},
    {"qwen3-30b-a3b",
     [] {
       ModelConfig c = qwen3(2048, 6144, 48, 32, 4);
       c.architecture = "qwen3_moe";
       c.name = "Qwen3-30B-A3B (dummy weights)";
       c.num_experts = 128;
       c.num_experts_per_token = 8;
       c.moe_intermediate_size = 768;
       c.norm_topk_prob = true;
       return c;
     }},
    {"mixtral-8x7b",
     [] {
       ModelConfig c;
       c.architecture = "mixtral";
       c.name = "Mixtral-8x7B-v0.1 (dummy weights)";
       c.vocab_size = 32000;
       c.hidden_size = 4096;
       c.intermediate_size = 14336;  // each expert's width
       c.num_layers = 32;
       c.num_heads = 32;
       c.num_kv_heads = 8;
       c.head_dim = 128;
       c.max_position_embeddings = 32768;
       c.rms_norm_eps = 1e-5f;
       c.rope_theta = 1000000.0f;
       c.num_experts = 8;
       c.num_experts_per_token = 2;
       c.bos_token_id = 1;
       c.eos_token_ids = {2};
       return c;
     }},
    {"mpt-7b",
     [] {
       ModelConfig c = mpt(4096, 32, 32, 2048);
       c.name = "MPT-7B (dummy weights)";
       return c;
     }},
    {"mpt-30b",
     [] {
       ModelConfig c = mpt(7168, 48, 64, 8192);
       c.name = "MPT-30B (dummy weights)";
       return c;
     }},
    {"smollm2-135m",
     [] {
       ModelConfig c;
       c.architecture = "llama";
       c.name = "SmolLM2-135M (dummy weights)";
       c.vocab_size = 49152;
       c.hidden_size = 576;
       c.intermediate_size = 1536;
       c.num_layers = 30;
       c.num_heads = 9;
       c.num_kv_heads = 3;
       c.head_dim = 64;
       c.max_position_embeddings = 8192;
       c.rms_norm_eps = 1e-5f;
       c.rope_theta = 100000.0f;
       c.tie_word_embeddings = true;
       c.bos_token_id = 1;
       c.eos_token_ids = {2};
       return c;
     }},
};

}  // namespace

std::optional<ModelConfig> arch_preset(std::string_view name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) {
      ModelConfig c = p.make();
      c.validate();
      return c;
    }
  }
  return std::nullopt;
}

std::vector<std::string> arch_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

ModelConfig dummy_model_config(const std::string& arch, const std::string& config_path) {
  INFLIGHT_CHECK_CODE(arch.empty() != config_path.empty(), ErrorCode::kInvalidArgument,
                      "dummy weights need exactly one of --arch NAME or --config config.json");
  if (!config_path.empty()) {
    std::ifstream in(config_path);
    INFLIGHT_CHECK_CODE(in.good(), ErrorCode::kNotFound, "cannot open '{}'", config_path);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      INFLIGHT_THROW(ErrorCode::kInvalidFile, "{}: {}", config_path, e.what());
    }
    return ModelConfig::from_hf_json(j);
  }
  if (auto c = arch_preset(arch)) return *c;
  std::string names;
  for (const std::string& n : arch_preset_names()) names += (names.empty() ? "" : ", ") + n;
  INFLIGHT_THROW(ErrorCode::kInvalidArgument, "unknown --arch '{}' (built-in: {})", arch, names);
}

}  // namespace inflight
