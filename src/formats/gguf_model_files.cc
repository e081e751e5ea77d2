#include "formats/gguf_model_files.h"

#include <array>
#include <charconv>
#include <cstring>

#include "core/thread_pool.h"
#include "formats/ggml_types.h"

namespace inflight {
namespace {

// Per-layer tensor suffixes: GGUF -> Hugging Face (both without ".weight" / ".bias").
// The experts of a mixture-of-experts layer are stacked, [experts, rows, cols], under names of
// their own (no Hugging Face checkpoint has them): the model takes expert e as slice e
// (model/weight_source.h with_stacked_experts).
constexpr std::array<std::pair<std::string_view, std::string_view>, 16> kLayerNames = {{
    {"attn_norm", "input_layernorm"},
    {"attn_qkv", "self_attn.qkv_proj"},  // fused [q; k; v] (MPT)
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
    {"ffn_gate_inp", "mlp.gate"},  // the MoE router
    {"ffn_gate_exps", "mlp.experts.gate_proj"},
    {"ffn_up_exps", "mlp.experts.up_proj"},
    {"ffn_down_exps", "mlp.experts.down_proj"},
}};

// The per-expert tensors of older files ("blk.N.ffn_gate.E.weight"): GGUF -> Hugging Face.
constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kExpertNames = {{
    {"ffn_gate", "gate_proj"},
    {"ffn_up", "up_proj"},
    {"ffn_down", "down_proj"},
}};

// llama.cpp stores the q/k rows of these architectures permuted for interleaved RoPE (Mixtral
// is its `llama` with experts).
bool arch_permutes_qk(std::string_view arch) {
  return arch == "llama" || arch == "mistral" || arch == "mixtral";
}

RopeScaling read_rope_scaling(const GgufFile& f, const std::string& p) {
  RopeScaling rs;
  const std::string type(f.get_string_or(p + "rope.scaling.type", "none"));
  double factor = f.get_float_or(p + "rope.scaling.factor", 0.0);
  if (type == "none" || type.empty()) {
    // Older files carry only rope.scale_linear.
    const double legacy = f.get_float_or(p + "rope.scale_linear", 1.0);
    if (legacy == 1.0) return rs;
    factor = legacy;
  } else {
    INFLIGHT_CHECK_CODE(type == "linear", ErrorCode::kUnsupported,
                        "{}: {}rope.scaling.type '{}' is not supported (none, linear)", f.what(), p,
                        type);
  }
  rs.type = RopeScaling::Type::kLinear;
  rs.factor = static_cast<float>(factor);
  return rs;
}

// MPT (llama.cpp's `mpt`): LayerNorm, the GELU MLP, ALiBi, and biases where the file has them.
void read_mpt(const GgufFile& f, const std::string& p, ModelConfig& c) {
  c.rms_norm_eps = static_cast<float>(f.get_float(p + "attention.layer_norm_epsilon"));
  c.norm = ModelConfig::Norm::kLayer;
  c.mlp = ModelConfig::Mlp::kGelu;
  c.positions = ModelConfig::Positions::kAlibi;
  const double bias_max = f.get_float_or(p + "attention.max_alibi_bias", 8.0);
  INFLIGHT_CHECK_CODE(bias_max > 0, ErrorCode::kUnsupported,
                      "{}: {}attention.max_alibi_bias {}: MPT without ALiBi (learned position "
                      "embeddings) is not supported",
                      f.what(), p, bias_max);
  c.alibi_bias_max = static_cast<float>(bias_max);
  c.clip_qkv = static_cast<float>(f.get_float_or(p + "attention.clamp_kqv", 0.0));
  for (const char* t :
       {"position_embd.weight", "blk.0.attn_q_norm.weight", "blk.0.ffn_act.scales"}) {
    INFLIGHT_CHECK_CODE(f.find_tensor(t) == nullptr, ErrorCode::kUnsupported,
                        "{}: MPT with tensor '{}' (learned positions, q/k LayerNorm or "
                        "activation scales) is not supported",
                        f.what(), t);
  }
  c.mlp_bias = f.find_tensor("blk.0.ffn_up.bias") != nullptr;
  c.norm_bias = f.find_tensor("blk.0.attn_norm.bias") != nullptr;
}

}  // namespace

std::string GgufModelFiles::canonical_name(std::string_view n) {
  if (n == "token_embd.weight") return "model.embed_tokens.weight";
  if (n == "output_norm.weight") return "model.norm.weight";
  if (n == "output.weight") return "lm_head.weight";
  constexpr std::string_view kBlk = "blk.";
  if (n.substr(0, kBlk.size()) != kBlk) return std::string(n);
  const std::string_view rest = n.substr(kBlk.size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::string(n);
  unsigned layer = 0;
  const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + dot, layer);
  if (ec != std::errc() || ptr != rest.data() + dot) return std::string(n);
  const std::string_view tail = rest.substr(dot + 1);  // "attn_q.weight"
  const size_t kind_dot = tail.rfind('.');
  if (kind_dot == std::string_view::npos) return std::string(n);
  const std::string_view base = tail.substr(0, kind_dot), kind = tail.substr(kind_dot + 1);
  if (kind != "weight" && kind != "bias") return std::string(n);
  for (const auto& [gguf, hf] : kLayerNames) {
    if (base == gguf) return fmt::format("model.layers.{}.{}.{}", layer, hf, kind);
  }
  // Files from before llama.cpp stacked the experts: one tensor per expert, "ffn_gate.<e>".
  const size_t expert_dot = base.rfind('.');
  if (expert_dot != std::string_view::npos && expert_dot + 1 < base.size()) {
    unsigned expert = 0;
    const char* digits = base.data() + expert_dot + 1;
    const auto [end, err] = std::from_chars(digits, base.data() + base.size(), expert);
    const std::string_view ffn = base.substr(0, expert_dot);
    if (err == std::errc() && end == base.data() + base.size()) {
      for (const auto& [gguf, proj] : kExpertNames) {
        if (ffn == gguf) {
          return fmt::format("model.layers.{}.mlp.experts.{}.{}.{}", layer, expert, proj, kind);
        }
      }
    }
  }
  return std::string(n);
}

ModelConfig GgufModelFiles::read_config(const GgufFile& f) {
  const std::string arch(f.get_string("general.architecture"));
  INFLIGHT_CHECK_CODE(!arch.empty() && arch.find('.') == std::string::npos,
                      ErrorCode::kInvalidFile, "{}: general.architecture '{}' is not a name",
                      f.what(), arch);
  const std::string p = arch + ".";
  ModelConfig c;
  try {
    c.architecture = arch;
    c.name = std::string(f.get_string_or("general.name", ""));
    c.hidden_size = f.get_int(p + "embedding_length");
    c.num_layers = f.get_int(p + "block_count");
    // Mixture of experts: llama.cpp renormalises the chosen experts' weights unless the file
    // says otherwise (Mixtral, Qwen3-MoE).
    c.num_experts = f.get_int_or(p + "expert_count", 0);
    c.num_experts_per_token = f.get_int_or(p + "expert_used_count", 0);
    c.moe_intermediate_size = f.get_int_or(p + "expert_feed_forward_length", 0);
    c.norm_topk_prob = f.get_bool_or(p + "expert_weights_norm", true);
    if (c.num_experts > 0 && !f.has(p + "feed_forward_length") && c.moe_intermediate_size > 0) {
      c.intermediate_size = c.moe_intermediate_size;
    } else {
      c.intermediate_size = f.get_int(p + "feed_forward_length");
    }
    // llama.cpp writes Mixtral as `llama` with experts.
    if (arch == "llama" && c.num_experts > 0) c.architecture = "mixtral";
    c.num_heads = f.get_int(p + "attention.head_count");
    c.num_kv_heads = f.get_int_or(p + "attention.head_count_kv", c.num_heads);
    if (f.has(p + "attention.key_length")) {
      c.head_dim = f.get_int(p + "attention.key_length");
    } else {
      INFLIGHT_CHECK_CODE(c.num_heads > 0 && c.hidden_size % c.num_heads == 0,
                          ErrorCode::kInvalidFile,
                          "{}: {}embedding_length {} is not divisible by head_count {}", f.what(), p,
                          c.hidden_size, c.num_heads);
      c.head_dim = c.hidden_size / c.num_heads;
    }
    const int64_t value_length = f.get_int_or(p + "attention.value_length", c.head_dim);
    INFLIGHT_CHECK_CODE(value_length == c.head_dim, ErrorCode::kUnsupported,
                        "{}: {}attention.value_length {} differs from key_length {}", f.what(), p,
                        value_length, c.head_dim);
    const int64_t rope_dims = f.get_int_or(p + "rope.dimension_count", c.head_dim);
    INFLIGHT_CHECK_CODE(rope_dims == c.head_dim, ErrorCode::kUnsupported,
                        "{}: {}rope.dimension_count {} != head dim {} (partial RoPE)", f.what(), p,
                        rope_dims, c.head_dim);
    c.max_position_embeddings = f.get_int(p + "context_length");
    if (arch == "mpt") {
      read_mpt(f, p, c);
    } else {
      c.rms_norm_eps = static_cast<float>(f.get_float(p + "attention.layer_norm_rms_epsilon"));
    }
    c.rope_theta = static_cast<float>(f.get_float_or(p + "rope.freq_base", 10000.0));
    c.rope_scaling = read_rope_scaling(f, p);
    if (f.has(p + "vocab_size")) {
      c.vocab_size = f.get_int(p + "vocab_size");
    } else if (f.has("tokenizer.ggml.tokens")) {
      c.vocab_size = static_cast<int64_t>(f.array_size("tokenizer.ggml.tokens"));
    } else if (const GgufTensorInfo* embd = f.find_tensor("token_embd.weight")) {
      c.vocab_size = embd->shape[0];
    }
    c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
    c.attention_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr ||
                       f.find_tensor("blk.0.attn_qkv.bias") != nullptr;
    c.o_proj_bias = f.find_tensor("blk.0.attn_output.bias") != nullptr;
    c.sliding_window = f.get_int_or(p + "attention.sliding_window", 0);
    c.bos_token_id = f.get_int_or("tokenizer.ggml.bos_token_id", -1);
    // End of turn / end of message ids stop generation too (Llama 3 chat models).
    for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                            "tokenizer.ggml.eom_token_id"}) {
      const int64_t id = f.get_int_or(key, -1);
      if (id < 0) continue;
      bool seen = false;
      for (const int64_t e : c.eos_token_ids) seen |= e == id;
      if (!seen) c.eos_token_ids.push_back(id);
    }
  } catch (const Error& e) {
    // A missing key is often a file of an architecture with keys of its own: name it.
    if (e.code() != ErrorCode::kNotFound) throw;
    INFLIGHT_THROW(e.code(), "{} (general.architecture is '{}')", e.message(), arch);
  }
  try {
    c.validate();
  } catch (const Error& e) {
    INFLIGHT_THROW(e.code(), "{}: {}", f.what(), e.message());
  }
  return c;
}

std::unique_ptr<GgufModelFiles> GgufModelFiles::open(const std::string& path) {
  return std::make_unique<GgufModelFiles>(GgufFile::open(path));
}

GgufModelFiles::GgufModelFiles(std::shared_ptr<GgufFile> gguf)
    : gguf_(std::move(gguf)), config_(read_config(*gguf_)) {
  for (const GgufTensorInfo& t : gguf_->tensors()) {
    std::string name = canonical_name(t.name);
    const bool inserted = by_name_.emplace(name, &t).second;
    INFLIGHT_CHECK_CODE(inserted, ErrorCode::kInvalidFile,
                        "{}: tensor '{}' maps to '{}', which another tensor already has",
                        gguf_->what(), t.name, name);
    names_.push_back(std::move(name));
  }
}

bool GgufModelFiles::has_tensor(const std::string& name) const {
  return by_name_.count(name);
}

const GgufTensorInfo& GgufModelFiles::tensor_info(const std::string& name) const {
  const auto it = by_name_.find(name);
  INFLIGHT_CHECK_CODE(it != by_name_.end(), ErrorCode::kNotFound, "{}: no tensor '{}'",
                      gguf_->what(), name);
  return *it->second;
}

Shape GgufModelFiles::tensor_shape(const std::string& name) const {
  return tensor_info(name).shape;
}

std::string GgufModelFiles::chat_template() const {
  return std::string(gguf_->get_string_or("tokenizer.chat_template", ""));
}

int64_t GgufModelFiles::permuted_heads(const std::string& name) const {
  if (!arch_permutes_qk(config_.architecture)) return 0;
  const auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".self_attn.q_proj.weight") || ends_with(".self_attn.q_proj.bias")) {
    return config_.num_heads;
  }
  if (ends_with(".self_attn.k_proj.weight") || ends_with(".self_attn.k_proj.bias")) {
    return config_.num_kv_heads;
  }
  return 0;
}

StoredTensor GgufModelFiles::load_raw(const std::string& name) const {
  const GgufTensorInfo& t = tensor_info(name);
  const GgmlTypeTraits* traits = ggml_type_traits(t.type);
  INFLIGHT_CHECK_CODE(traits && traits->can_dequantize, ErrorCode::kUnsupported,
                      "{}: tensor '{}' ('{}') has type {}, which cannot be dequantized (supported: "
                      "f32, f16, bf16, q4_0, q4_1, q8_0, q4_K, q6_K)",
                      gguf_->what(), name, t.name, ggml_type_name(t.type));
  StoredTensor s;
  s.name = name;
  s.shape = t.shape;
  switch (static_cast<GgmlType>(t.type)) {
    case GgmlType::kF32: s.type = StoredType::kF32; break;
    case GgmlType::kF16: s.type = StoredType::kF16; break;
    case GgmlType::kBF16: s.type = StoredType::kBF16; break;
    default:
      s.type = StoredType::kGgml;
      s.ggml_type = static_cast<GgmlType>(t.type);
  }
  s.data = t.data;
  s.owner = gguf_;
  s.file = gguf_->mapping();
  if (const int64_t heads = permuted_heads(name); heads > 0) {
    INFLIGHT_CHECK_CODE(s.shape[0] == heads * config_.head_dim && config_.head_dim % 2 == 0,
                        ErrorCode::kInvalidFile,
                        "{}: tensor '{}' has {} rows, expected {} heads x head dim {}",
                        gguf_->what(), t.name, s.shape[0], heads, config_.head_dim);
    s.interleaved_heads = heads;
  }
  return s;
}

}  // namespace inflight
