#include "formats/mpt_config.h"

#include <array>
#include <charconv>
#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "formats/json_key.h"

namespace inflight {
namespace {

using json = nlohmann::json;

constexpr const char* kFile = "config.json";

// An optional positive number (absent and null: 0, "unset").
float optional_positive(const JsonKey& key) {
  if (key.absent()) return 0.0f;
  const double v = key.number();
  INFLIGHT_CHECK_CODE(std::isfinite(v) && v > 0, ErrorCode::kInvalidFile,
                      "{} must be a positive number or null, found {}", key.where(), key.shown());
  return static_cast<float>(v);
}

// Refuses `key` unless it is absent or `expected`.
void require_value(const JsonKey& key, const json& expected, const char* supported) {
  INFLIGHT_CHECK_CODE(key.absent() || key.value() == expected, ErrorCode::kUnsupported,
                      "{} = {} is not supported ({})", key.where(), key.shown(), supported);
}

// attn_config: the attention variant of MPT-7B / MPT-30B (multi-head, ALiBi, no prefix LM, no
// q/k LayerNorm), with clip_qkv, softmax_scale and alibi_bias_max read into `c`.
void read_attn_config(const JsonKey& attn, ModelConfig& c) {
  if (attn.absent()) return;  // transformers' defaults: what the fields below default to
  attn.object();
  require_value(attn.at("attn_type"), "multihead_attention",
                "only multihead_attention; multiquery and grouped-query MPT are not");
  require_value(attn.at("prefix_lm"), false, "a prefix LM attends bidirectionally to its prompt");
  require_value(attn.at("qk_ln"), false, "LayerNorm of q and k");
  require_value(attn.at("rope"), false, "MPT with RoPE; ALiBi only");
  require_value(attn.at("alibi"), true,
                "MPT without ALiBi uses learned position embeddings: ALiBi only");
  const JsonKey window = attn.at("sliding_window_size");
  INFLIGHT_CHECK_CODE(window.absent() || window.integer() == -1, ErrorCode::kUnsupported,
                      "{} = {} is not supported (no sliding window)", window.where(),
                      window.shown());
  c.clip_qkv = optional_positive(attn.at("clip_qkv"));
  c.attention_scale = optional_positive(attn.at("softmax_scale"));
  const JsonKey bias_max = attn.at("alibi_bias_max");
  if (!bias_max.absent()) c.alibi_bias_max = optional_positive(bias_max);
}

// ffn_config (llm-foundry): only MPT's own GELU MLP.
void read_ffn_config(const JsonKey& ffn, ModelConfig& c) {
  if (ffn.absent()) return;
  ffn.object();
  require_value(ffn.at("ffn_type"), "mptmlp", "only mptmlp, the GELU MLP");
  const JsonKey act = ffn.at("ffn_act_fn");
  if (!act.absent()) {
    act.object();
    require_value(act.at("name"), "gelu", "only the exact GELU");
    require_value(act.at("approximate"), "none", "only the exact GELU");
  }
  const JsonKey width = ffn.at("ffn_hidden_size");
  if (!width.absent()) c.intermediate_size = width.integer();
}

}  // namespace

bool is_mpt_config(const json& j) {
  if (!j.is_object()) return false;
  const auto it = j.find("model_type");
  if (it != j.end() && it->is_string() && *it == "mpt") return true;
  const auto archs = j.find("architectures");
  return archs != j.end() && archs->is_array() && !archs->empty() && (*archs)[0].is_string() &&
         ((*archs)[0] == "MPTForCausalLM" || (*archs)[0] == "MptForCausalLM");
}

ModelConfig mpt_config_from_hf_json(const json& j) {
  const JsonKey root(&j, kFile, "");
  ModelConfig c;
  c.architecture = "mpt";
  c.name = root.at("_name_or_path").str_or_null().value_or("");
  c.vocab_size = root.at("vocab_size").require().integer();
  c.hidden_size = root.at("d_model").require().integer();
  c.num_heads = root.at("n_heads").require().integer();
  c.num_kv_heads = c.num_heads;
  c.num_layers = root.at("n_layers").require().integer();
  INFLIGHT_CHECK_CODE(c.num_heads > 0 && c.hidden_size % c.num_heads == 0, ErrorCode::kInvalidFile,
                      "{}: d_model {} is not divisible by n_heads {}", kFile, c.hidden_size,
                      c.num_heads);
  c.head_dim = c.hidden_size / c.num_heads;
  const JsonKey expansion = root.at("expansion_ratio");
  const int64_t ratio = expansion.absent() ? 4 : expansion.integer();
  INFLIGHT_CHECK_CODE(ratio > 0 && ratio <= ModelConfig::kMaxDimension, ErrorCode::kInvalidFile,
                      "{} must be a positive integer, found {}", expansion.where(),
                      expansion.shown());
  c.intermediate_size = ratio * c.hidden_size;  // validate() bounds the product
  const JsonKey seq = root.at("max_seq_len");
  c.max_position_embeddings = seq.absent() ? 2048 : seq.integer();
  const JsonKey eps = root.at("layer_norm_epsilon");
  c.rms_norm_eps = eps.absent() ? 1e-5f : static_cast<float>(eps.number());

  const JsonKey norm_type = root.at("norm_type");
  INFLIGHT_CHECK_CODE(norm_type.absent() || norm_type.str() == "low_precision_layernorm" ||
                          norm_type.str() == "layernorm",
                      ErrorCode::kUnsupported,
                      "{} = {} is not supported (low_precision_layernorm, layernorm)",
                      norm_type.where(), norm_type.shown());
  c.norm = ModelConfig::Norm::kLayer;
  c.positions = ModelConfig::Positions::kAlibi;
  c.mlp = ModelConfig::Mlp::kGelu;
  // no_bias (default true, every released MPT): no bias in any linear layer or LayerNorm.
  const JsonKey no_bias = root.at("no_bias");
  const bool biases = !no_bias.absent() && !no_bias.boolean();
  c.attention_bias = c.o_proj_bias = c.mlp_bias = c.norm_bias = biases;
  read_attn_config(root.at("attn_config"), c);
  read_ffn_config(root.at("ffn_config"), c);

  // logit_scale: null, a number, or "inv_sqrt_d_model".
  const JsonKey logit_scale = root.at("logit_scale");
  if (!logit_scale.absent()) {
    if (logit_scale.value().is_string()) {
      INFLIGHT_CHECK_CODE(logit_scale.str() == "inv_sqrt_d_model", ErrorCode::kInvalidFile,
                          "{} = {} is not a number or \"inv_sqrt_d_model\"", logit_scale.where(),
                          logit_scale.shown());
      c.logit_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.hidden_size)));
    } else {
      c.logit_scale = static_cast<float>(logit_scale.number());
    }
  }
  const JsonKey tied = root.at("tie_word_embeddings");
  c.tie_word_embeddings = tied.absent() || tied.boolean();
  const JsonKey bos = root.at("bos_token_id");
  c.bos_token_id = bos.absent() ? -1 : bos.integer();
  const JsonKey eos = root.at("eos_token_id");
  if (!eos.absent() && eos.value().is_array()) {
    for (size_t i = 0; i < eos.value().size(); ++i)
      c.eos_token_ids.push_back(eos.index(i).integer());
  } else if (!eos.absent()) {
    c.eos_token_ids.push_back(eos.integer());
  }
  c.quantization = Quantization::from_hf(j, nullptr);
  c.validate();
  return c;
}

std::string mpt_canonical_name(std::string_view n) {
  constexpr std::array<std::pair<std::string_view, std::string_view>, 2> kTop = {{
      {"transformer.wte.", "model.embed_tokens."},
      {"transformer.norm_f.", "model.norm."},
  }};
  for (const auto& [mpt, canonical] : kTop) {
    if (n.substr(0, mpt.size()) == mpt)
      return std::string(canonical) + std::string(n.substr(mpt.size()));
  }
  constexpr std::string_view kBlocks = "transformer.blocks.";
  if (n.substr(0, kBlocks.size()) != kBlocks) return std::string(n);
  const std::string_view rest = n.substr(kBlocks.size());  // "3.attn.Wqkv.weight"
  const size_t dot = rest.find('.');
  unsigned layer = 0;
  const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + dot, layer);
  if (dot == std::string_view::npos || ec != std::errc() || ptr != rest.data() + dot) {
    return std::string(n);
  }
  const std::string_view tail = rest.substr(dot + 1);
  constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kLayer = {{
      {"norm_1.", "input_layernorm."},
      {"attn.Wqkv.", "self_attn.qkv_proj."},
      {"attn.out_proj.", "self_attn.o_proj."},
      {"norm_2.", "post_attention_layernorm."},
      {"ffn.up_proj.", "mlp.up_proj."},
      {"ffn.down_proj.", "mlp.down_proj."},
  }};
  for (const auto& [mpt, canonical] : kLayer) {
    if (tail.substr(0, mpt.size()) == mpt) {
      return fmt::format("model.layers.{}.{}{}", layer, canonical, tail.substr(mpt.size()));
    }
  }
  return std::string(n);
}

}  // namespace inflight
