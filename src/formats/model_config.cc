#include "formats/model_config.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "formats/mpt_config.h"

namespace inflight {
namespace {

using json = nlohmann::json;

// Typed reads of config.json keys; absent and null both mean "use the fallback".
class HfConfigReader {
 public:
  explicit HfConfigReader(const json& j) : j_(j) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  int64_t get_int(const char* key) const {
    INFLIGHT_CHECK_CODE(has(key), ErrorCode::kInvalidFile, "config.json: key '{}' is missing", key);
    return as_int(j_[key], key);
  }
  int64_t get_int_or(const char* key, int64_t fallback) const {
    return has(key) ? get_int(key) : fallback;
  }
  double get_float_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    return as_float(j_[key], key);
  }
  bool get_bool_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    INFLIGHT_CHECK_CODE(j_[key].is_boolean(), ErrorCode::kInvalidFile,
                        "config.json: key '{}' must be true or false, found {}", key,
                        j_[key].dump());
    return j_[key].get<bool>();
  }
  std::string get_string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    INFLIGHT_CHECK_CODE(j_[key].is_string(), ErrorCode::kInvalidFile,
                        "config.json: key '{}' must be a string, found {}", key, j_[key].dump());
    return j_[key].get<std::string>();
  }

  static int64_t as_int(const json& v, const std::string& key) {
    INFLIGHT_CHECK_CODE(v.is_number_integer(), ErrorCode::kInvalidFile,
                        "config.json: key '{}' must be an integer, found {}", key, v.dump());
    if (v.is_number_unsigned()) {
      INFLIGHT_CHECK_CODE(v.get<uint64_t>() <= uint64_t{INT64_MAX}, ErrorCode::kInvalidFile,
                          "config.json: key '{}' is too large: {}", key, v.dump());
    }
    return v.get<int64_t>();
  }
  static double as_float(const json& v, const std::string& key) {
    INFLIGHT_CHECK_CODE(v.is_number(), ErrorCode::kInvalidFile,
                        "config.json: key '{}' must be a number, found {}", key, v.dump());
    return v.get<double>();
  }

 private:
  const json& j_;
};

// `key` ("rope_scaling", or "rope_parameters" since transformers 5) is
//   null | {"rope_type" (or legacy "type"): "linear" | "llama3" | "default", ...}
RopeScaling rope_scaling_from_json(const json& j, const char* key) {
  RopeScaling rs;
  if (!j.contains(key) || j[key].is_null()) return rs;
  const json& s = j[key];
  INFLIGHT_CHECK_CODE(s.is_object(), ErrorCode::kInvalidFile,
                      "config.json: key '{}' must be an object or null, found {}", key,
                      s.dump());
  const HfConfigReader r(s);
  const std::string type = r.get_string_or("rope_type", r.get_string_or("type", "default"));
  if (type == "default") return rs;
  if (type == "linear") {
    rs.type = RopeScaling::Type::kLinear;
  } else if (type == "llama3") {
    rs.type = RopeScaling::Type::kLlama3;
    rs.low_freq_factor = static_cast<float>(r.get_float_or("low_freq_factor", rs.low_freq_factor));
    rs.high_freq_factor =
        static_cast<float>(r.get_float_or("high_freq_factor", rs.high_freq_factor));
    rs.original_max_position_embeddings = static_cast<int>(
        r.get_int_or("original_max_position_embeddings", rs.original_max_position_embeddings));
  } else {
    INFLIGHT_THROW(ErrorCode::kUnsupported,
                   "config.json: rope_scaling type '{}' is not supported (only linear, llama3)",
                   type);
  }
  INFLIGHT_CHECK_CODE(r.has("factor"), ErrorCode::kInvalidFile,
                      "config.json: rope_scaling of type '{}' needs a 'factor'", type);
  rs.factor = static_cast<float>(r.get_float_or("factor", 1.0));
  return rs;
}

// "eos_token_id": int | [int, ...] | null
std::vector<int64_t> eos_from_json(const json& j) {
  std::vector<int64_t> out;
  if (!j.contains("eos_token_id") || j["eos_token_id"].is_null()) return out;
  const json& v = j["eos_token_id"];
  if (v.is_array()) {
    for (const json& e : v) out.push_back(HfConfigReader::as_int(e, "eos_token_id"));
  } else {
    out.push_back(HfConfigReader::as_int(v, "eos_token_id"));
  }
  return out;
}

}  // namespace

ModelConfig ModelConfig::from_hf_json(const nlohmann::json& j) {
  INFLIGHT_CHECK_CODE(j.is_object(), ErrorCode::kInvalidFile,
                      "config.json: top level must be a JSON object");
  const HfConfigReader r(j);
  ModelConfig c;

  std::string hf_arch;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    hf_arch = j["architectures"][0].get<std::string>();
  } else {
    hf_arch = r.get_string_or("model_type", "");
  }
  INFLIGHT_CHECK_CODE(!hf_arch.empty(), ErrorCode::kInvalidFile,
                      "config.json: needs 'architectures' (or 'model_type')");
  // MPT names its sizes (d_model, n_heads, ...) and attention options its own way.
  if (is_mpt_config(j)) return mpt_config_from_hf_json(j);
  // Which architectures exist is the model registry's business (model/registry.h).
  c.architecture = hf_arch;
  const std::string act = r.get_string_or("hidden_act", "silu");
  INFLIGHT_CHECK_CODE(act == "silu", ErrorCode::kUnsupported,
                      "config.json: hidden_act '{}' is not supported (only silu)", act);

  c.name = r.get_string_or("_name_or_path", "");
  c.vocab_size = r.get_int("vocab_size");
  c.hidden_size = r.get_int("hidden_size");
  c.intermediate_size = r.get_int("intermediate_size");
  c.num_layers = r.get_int("num_hidden_layers");
  c.num_heads = r.get_int("num_attention_heads");
  c.num_kv_heads = r.get_int_or("num_key_value_heads", c.num_heads);
  if (r.has("head_dim")) {
    c.head_dim = r.get_int("head_dim");
  } else {
    INFLIGHT_CHECK_CODE(c.num_heads > 0 && c.hidden_size % c.num_heads == 0,
                        ErrorCode::kInvalidFile,
                        "config.json: hidden_size {} is not divisible by num_attention_heads {} "
                        "and there is no head_dim",
                        c.hidden_size, c.num_heads);
    c.head_dim = c.hidden_size / c.num_heads;
  }
  c.max_position_embeddings = r.get_int("max_position_embeddings");
  c.rms_norm_eps = static_cast<float>(r.get_float_or("rms_norm_eps", 1e-6));
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    // transformers >= 5 keeps theta and the scaling together.
    c.rope_theta = static_cast<float>(
        HfConfigReader(j["rope_parameters"]).get_float_or("rope_theta", 10000.0));
    c.rope_scaling = rope_scaling_from_json(j, "rope_parameters");
  } else {
    c.rope_theta = static_cast<float>(r.get_float_or("rope_theta", 10000.0));
    c.rope_scaling = rope_scaling_from_json(j, "rope_scaling");
  }
  c.tie_word_embeddings = r.get_bool_or("tie_word_embeddings", false);

  c.attention_bias = r.get_bool_or("attention_bias", false);
  c.o_proj_bias = c.attention_bias;
  // Qwen2/Qwen3 configs state a window and switch it off with use_sliding_window = false.
  if (r.get_bool_or("use_sliding_window", true)) c.sliding_window = r.get_int_or("sliding_window", 0);
  c.num_experts = r.get_int_or("num_local_experts", r.get_int_or("num_experts", 0));
  c.num_experts_per_token = r.get_int_or("num_experts_per_tok", 0);
  c.moe_intermediate_size = r.get_int_or("moe_intermediate_size", 0);
  // Absent, transformers' Qwen3-MoE config does not renormalise (Mixtral always does).
  const bool qwen_moe = hf_arch == "Qwen3MoeForCausalLM" || hf_arch == "qwen3_moe";
  c.norm_topk_prob = r.get_bool_or("norm_topk_prob", !qwen_moe);
  if (c.num_experts > 0) {
    // Qwen-MoE configs may keep some layers dense; every layer here is sparse.
    const int64_t sparse_step = r.get_int_or("decoder_sparse_step", 1);
    const bool dense_layers = j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array() &&
                              !j["mlp_only_layers"].empty();
    INFLIGHT_CHECK_CODE(
        sparse_step == 1 && !dense_layers, ErrorCode::kUnsupported,
        "config.json: decoder_sparse_step {} / mlp_only_layers {}: dense layers "
        "between the mixture-of-experts layers are not supported",
        sparse_step,
        j.contains("mlp_only_layers") ? j["mlp_only_layers"].dump() : std::string("[]"));
  }
  c.bos_token_id = r.get_int_or("bos_token_id", -1);
  c.eos_token_ids = eos_from_json(j);
  c.quantization = Quantization::from_hf(j, nullptr);
  c.validate();
  return c;
}

void ModelConfig::validate() const {
  // Every count is one dimension of some tensor (or a position): tensors index with int32
  // per dimension, so a value past 2^31 - 1 cannot come from a real model. `field` names the
  // ModelConfig field and the config.json key it comes from.
  const auto dimension = [](int64_t v, const char* field) {
    INFLIGHT_CHECK_CODE(v > 0, ErrorCode::kInvalidFile, "model config: {} must be positive, is {}",
                        field, v);
    INFLIGHT_CHECK_CODE(v <= kMaxDimension, ErrorCode::kInvalidFile,
                        "model config: {} is {}, more than 2^31 - 1: no real model has that", field,
                        v);
  };
  INFLIGHT_CHECK_CODE(!architecture.empty(), ErrorCode::kInvalidFile,
                      "model config: no architecture");
  dimension(vocab_size, "vocab_size");
  dimension(hidden_size, "hidden_size");
  dimension(intermediate_size, "intermediate_size");
  dimension(num_layers, "num_layers (num_hidden_layers)");
  dimension(num_heads, "num_heads (num_attention_heads)");
  dimension(num_kv_heads, "num_kv_heads (num_key_value_heads)");
  dimension(head_dim, "head_dim");
  dimension(max_position_embeddings, "max_position_embeddings");
  INFLIGHT_CHECK_CODE(sliding_window <= kMaxDimension && num_experts <= kMaxDimension &&
                          moe_intermediate_size <= kMaxDimension,
                      ErrorCode::kInvalidFile,
                      "model config: sliding_window {}, num_experts {} or moe_intermediate_size "
                      "{} is more than 2^31 - 1",
                      sliding_window, num_experts, moe_intermediate_size);
  num_weight_elements();  // throws, naming the product, where the sizes multiply past int64
  INFLIGHT_CHECK_CODE(num_heads % num_kv_heads == 0, ErrorCode::kInvalidFile,
                      "model config: num_heads {} is not a multiple of num_kv_heads {}", num_heads,
                      num_kv_heads);
  INFLIGHT_CHECK_CODE(head_dim % 2 == 0, ErrorCode::kInvalidFile,
                      "model config: head_dim {} must be even for RoPE", head_dim);
  INFLIGHT_CHECK_CODE(std::isfinite(rms_norm_eps) && rms_norm_eps > 0, ErrorCode::kInvalidFile,
                      "model config: rms_norm_eps must be positive, is {}", rms_norm_eps);
  INFLIGHT_CHECK_CODE(std::isfinite(rope_theta) && rope_theta > 0, ErrorCode::kInvalidFile,
                      "model config: rope_theta must be positive, is {}", rope_theta);
  if (rope_scaling.type != RopeScaling::Type::kNone) {
    INFLIGHT_CHECK_CODE(
        std::isfinite(rope_scaling.factor) && rope_scaling.factor > 0, ErrorCode::kInvalidFile,
        "model config: rope_scaling factor must be positive, is {}", rope_scaling.factor);
  }
  if (rope_scaling.type == RopeScaling::Type::kLlama3) {
    INFLIGHT_CHECK_CODE(rope_scaling.low_freq_factor > 0 &&
                            rope_scaling.high_freq_factor > rope_scaling.low_freq_factor &&
                            rope_scaling.original_max_position_embeddings > 0,
                        ErrorCode::kInvalidFile,
                        "model config: llama3 rope_scaling needs 0 < low_freq_factor ({}) < "
                        "high_freq_factor ({}) and original_max_position_embeddings > 0 ({})",
                        rope_scaling.low_freq_factor, rope_scaling.high_freq_factor,
                        rope_scaling.original_max_position_embeddings);
  }
  INFLIGHT_CHECK_CODE(num_experts >= 0 && num_experts_per_token >= 0 &&
                          num_experts_per_token <= num_experts && moe_intermediate_size >= 0,
                      ErrorCode::kInvalidFile,
                      "model config: {} experts with {} per token (moe_intermediate_size {}) do "
                      "not make a mixture of experts",
                      num_experts, num_experts_per_token, moe_intermediate_size);
  INFLIGHT_CHECK_CODE(sliding_window >= 0, ErrorCode::kInvalidFile,
                      "model config: sliding_window must be >= 0, is {}", sliding_window);
  INFLIGHT_CHECK_CODE(std::isfinite(clip_qkv) && clip_qkv >= 0, ErrorCode::kInvalidFile,
                      "model config: clip_qkv must be positive (or unset), is {}", clip_qkv);
  INFLIGHT_CHECK_CODE(
      std::isfinite(attention_scale) && attention_scale >= 0, ErrorCode::kInvalidFile,
      "model config: softmax_scale must be positive (or unset), is {}", attention_scale);
  INFLIGHT_CHECK_CODE(std::isfinite(logit_scale) && logit_scale > 0, ErrorCode::kInvalidFile,
                      "model config: logit_scale must be positive, is {}", logit_scale);
  INFLIGHT_CHECK_CODE(std::isfinite(alibi_bias_max) && alibi_bias_max > 0, ErrorCode::kInvalidFile,
                      "model config: alibi_bias_max must be positive, is {}", alibi_bias_max);
  INFLIGHT_CHECK_CODE(bos_token_id >= -1 && bos_token_id < vocab_size, ErrorCode::kInvalidFile,
                      "model config: bos_token_id {} is outside the vocabulary [0, {})",
                      bos_token_id, vocab_size);
  for (const int64_t eos : eos_token_ids) {
    INFLIGHT_CHECK_CODE(eos >= 0 && eos < vocab_size, ErrorCode::kInvalidFile,
                        "model config: eos_token_id {} is outside the vocabulary [0, {})", eos,
                        vocab_size);
  }
}

namespace {

// a * b, or an error naming what the product is when it does not fit int64.
int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  INFLIGHT_CHECK_CODE(!__builtin_mul_overflow(a, b, &r), ErrorCode::kInvalidFile,
                      "model config: {} ({} x {}) overflows int64", what, a, b);
  return r;
}

int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  INFLIGHT_CHECK_CODE(!__builtin_add_overflow(a, b, &r), ErrorCode::kInvalidFile,
                      "model config: {} ({} + {}) overflows int64", what, a, b);
  return r;
}

}  // namespace

int64_t ModelConfig::num_weight_elements() const {
  const int64_t q_dim = checked_mul(num_heads, head_dim, "num_attention_heads x head_dim");
  const int64_t kv_dim = checked_mul(num_kv_heads, head_dim, "num_key_value_heads x head_dim");
  const int64_t qkv_rows = checked_add(q_dim, checked_mul(2, kv_dim, "2 x kv_dim"), "q/k/v rows");
  int64_t layer = checked_mul(qkv_rows, hidden_size, "q/k/v projection: rows x hidden_size");
  layer = checked_add(layer, checked_mul(q_dim, hidden_size, "o projection"), "one layer");
  const int64_t mlp = checked_mul(checked_mul(3, intermediate_size, "3 x intermediate_size"),
                                  hidden_size, "MLP: 3 x intermediate_size x hidden_size");
  layer = checked_add(layer, mlp, "one layer");
  if (num_experts > 0) {
    const int64_t expert_width = expert_intermediate_size();
    const int64_t experts =
        checked_mul(checked_mul(num_experts, 3 * expert_width, "num_experts x 3 x expert width"),
                    hidden_size, "experts x hidden_size");
    layer = checked_add(layer, experts, "one layer");
  }
  // Norms and biases.
  layer = checked_add(layer, checked_add(2 * hidden_size, qkv_rows + hidden_size, "biases"),
                      "one layer");
  const int64_t layers = checked_mul(num_layers, layer, "num_hidden_layers x one layer's weights");
  const int64_t embed = checked_mul(vocab_size, hidden_size, "vocab_size x hidden_size");
  const int64_t total = checked_add(
      layers, checked_add(checked_mul(2, embed, "embedding and LM head"), hidden_size, "head"),
      "the whole model");
  // 8 bytes an element must still fit int64 (device bytes are computed from this).
  INFLIGHT_CHECK_CODE(total <= (int64_t{1} << 60), ErrorCode::kInvalidFile,
                      "model config: {} weight elements (num_hidden_layers {}, hidden_size {}, "
                      "intermediate_size {}, vocab_size {}) is more than 2^60: no real model "
                      "has that",
                      total, num_layers, hidden_size, intermediate_size, vocab_size);
  return total;
}

}  // namespace inflight
