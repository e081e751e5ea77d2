// ModelConfig: the hyper-parameters of a decoder-only transformer, filled from GGUF metadata or
// a Hugging Face config.json, validated once at load and immutable afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "formats/quantization.h"

namespace inflight {

// RoPE frequency scaling (HF `rope_scaling`).
struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3 };
  Type type = Type::kNone;
  float factor = 1.0f;                  // linear and llama3
  float low_freq_factor = 1.0f;         // llama3
  float high_freq_factor = 4.0f;        // llama3
  int original_max_position_embeddings = 8192;  // llama3
};

struct ModelConfig {
  // The architecture: as the file names it (HF `architectures[0]` or `model_type`, GGUF
  // `general.architecture`) until the model registry resolves it to its family name ("llama",
  // "mistral", "qwen2": model/registry.h).
  std::string architecture = "llama";
  std::string name;  // human-readable (general.name / _name_or_path), may be empty

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;           // d_model
  int64_t intermediate_size = 0;     // MLP width
  int64_t num_layers = 0;
  int64_t num_heads = 0;             // query heads
  int64_t num_kv_heads = 0;          // key/value heads (GQA when < num_heads)
  int64_t head_dim = 0;              // usually hidden_size / num_heads
  int64_t max_position_embeddings = 0;  // context length the model was trained for

  float rms_norm_eps = 1e-5f;  // the norms' epsilon, RMSNorm or LayerNorm (MPT)
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;

  bool tie_word_embeddings = false;  // lm_head shares model.embed_tokens.weight
  bool attention_bias = false;       // q/k/v projections have a bias (Qwen2)
  bool o_proj_bias = false;          // the output projection has one (HF `attention_bias`)
  int64_t sliding_window = 0;        // 0 = full attention (Mistral v0.1 sets 4096)

  // ---- beyond the Llama family: each architecture's model implements the features it reads,
  // and its registry entry refuses a config with features it lacks (model/registry.h) ----------
  // Mixture of experts (Mixtral, Qwen3-MoE): num_experts 0 = a dense MLP.
  int64_t num_experts = 0;            // HF num_local_experts / num_experts
  int64_t num_experts_per_token = 0;  // HF num_experts_per_tok: experts each token is routed to
  int64_t moe_intermediate_size = 0;  // one expert's MLP width (0: intermediate_size)
  bool norm_topk_prob = true;         // renormalise the chosen experts' router weights
  // One expert's MLP width: moe_intermediate_size, or intermediate_size where that is 0 (Mixtral).
  int64_t expert_intermediate_size() const {
    return moe_intermediate_size > 0 ? moe_intermediate_size : intermediate_size;
  }
  // Position information: rotary (RoPE) or attention biases (ALiBi, MPT).
  enum class Positions { kRope, kAlibi };
  Positions positions = Positions::kRope;
  // ALiBi: head h of H (H' = H rounded up to a power of two) has the slope
  // 2^(-alibi_bias_max (i + 1) / H') for i = h when H is a power of two, else for the h-th of
  // the odd-indexed then the even-indexed ones (model/alibi.h).
  float alibi_bias_max = 8.0f;
  // Normalisation: RMSNorm, or LayerNorm with or without a bias (MPT).
  enum class Norm { kRms, kLayer };
  Norm norm = Norm::kRms;
  bool norm_bias = false;
  bool qk_norm = false;  // per-head RMSNorm of q and k before RoPE (Qwen3)
  // The dense MLP: down(silu(gate(x)) * up(x)) (Llama), or down(gelu(up(x))) with the exact erf
  // GELU and no gate (MPT).
  enum class Mlp { kSwiGlu, kGelu };
  Mlp mlp = Mlp::kSwiGlu;
  bool mlp_bias = false;         // up and down projections have biases (MPT with no_bias false)
  float clip_qkv = 0.0f;         // > 0: the fused q/k/v output clamped to [-clip, clip] (MPT)
  float attention_scale = 0.0f;  // > 0: the scores' scale (MPT softmax_scale); 0: 1 / sqrt(D)
  float logit_scale = 1.0f;      // logits multiplied by it (MPT logit_scale)

  // How the checkpoint's linear layers are quantized (config.json quantization_config, or
  // hf_quant_config.json: formats/quantization.h); kNone for GGUF files and plain checkpoints;
  // online FP8 when asked for at load (Quantization::online_fp8).
  Quantization quantization;

  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;  // generation stops at any of these

  // No dimension may exceed this (tensors index with int32 per dimension).
  static constexpr int64_t kMaxDimension = INT32_MAX;

  // Throws Error(kInvalidFile) naming the offending field.
  void validate() const;
  // Elements of a dense decoder with these sizes (every projection, the experts, untied
  // embedding and head, norms and biases): an upper bound on what an architecture stores.
  // Throws Error(kInvalidFile) naming the product that overflows int64 or passes 2^60.
  int64_t num_weight_elements() const;

  // From a Hugging Face config.json object (its quantization_config included; HfModelFiles adds
  // hf_quant_config.json). Throws naming the key on a wrong type/value.
  static ModelConfig from_hf_json(const nlohmann::json& j);
};

}  // namespace inflight
