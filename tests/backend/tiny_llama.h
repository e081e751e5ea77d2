// Small random-weight Llama-family models and a driver that feeds sequences through
// LlamaModel::forward in arbitrary steps over a paged KV cache with random block tables.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "model/llama.h"
#include "runtime/forward_batch.h"

namespace inflight::testing {

// A tiny config with awkward sizes (GQA 3:1, head_dim 8, vocab 97) for `arch`: llama with llama3
// RoPE scaling, mistral with a sliding window of 9, qwen2 with q/k/v biases and tied embeddings,
// qwen3 with q/k norms and head_dim 16 (q wider than hidden), mixtral with 5 experts of 32
// (top-2) and a window of 9, qwen3_moe with q/k norms and 7 experts of 24 (top-3), mpt
// (multi-head: 6 kv heads) with ALiBi, LayerNorm, the GELU MLP, every bias (no_bias false),
// clip_qkv 1.5 and tied embeddings.
inline ModelConfig tiny_config(const std::string& arch) {
  ModelConfig c;
  c.architecture = arch;
  c.vocab_size = 97;
  c.hidden_size = 48;
  c.intermediate_size = 80;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 512;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  if (arch == "qwen2") {
    c.attention_bias = true;
    c.tie_word_embeddings = true;
  } else if (arch == "mistral") {
    c.sliding_window = 9;
  } else if (arch == "qwen3") {
    c.qk_norm = true;
    c.head_dim = 16;
  } else if (arch == "mixtral") {
    c.sliding_window = 9;
    c.intermediate_size = 32;
    c.num_experts = 5;
    c.num_experts_per_token = 2;
  } else if (arch == "qwen3_moe") {
    c.qk_norm = true;
    c.num_experts = 7;
    c.num_experts_per_token = 3;
    c.moe_intermediate_size = 24;
  } else if (arch == "mpt") {
    c.num_kv_heads = c.num_heads;
    c.norm = ModelConfig::Norm::kLayer;
    c.positions = ModelConfig::Positions::kAlibi;
    c.mlp = ModelConfig::Mlp::kGelu;
    c.attention_bias = c.o_proj_bias = c.mlp_bias = c.norm_bias = true;
    c.clip_qkv = 1.5f;
    c.tie_word_embeddings = true;
  } else {
    c.rope_scaling.type = RopeScaling::Type::kLlama3;
    c.rope_scaling.factor = 8.0f;
    c.rope_scaling.original_max_position_embeddings = 64;
  }
  return c;
}

// Random weights with enough spread that logits are far from uniform.
inline WeightMap random_weights(const ModelConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  WeightMap w;
  auto add = [&](const std::string& name, Shape shape, float center, float spread) {
    Tensor t = Tensor::empty(shape, DType::kF32);
    std::uniform_real_distribution<float> dist(center - spread, center + spread);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
    w[name] = t;
  };
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  add("model.embed_tokens.weight", {c.vocab_size, h}, 0.0f, 1.0f);
  add("model.norm.weight", {h}, 1.0f, 0.2f);
  if (!c.tie_word_embeddings) add("lm_head.weight", {c.vocab_size, h}, 0.0f, 0.3f);
  if (c.norm_bias) add("model.norm.bias", {h}, 0.0f, 0.2f);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {h}, 1.0f, 0.2f);
    add(p + "post_attention_layernorm.weight", {h}, 1.0f, 0.2f);
    if (c.architecture == "mpt") {  // fused [q; k; v], the GELU MLP, biases
      add(p + "input_layernorm.bias", {h}, 0.0f, 0.2f);
      add(p + "post_attention_layernorm.bias", {h}, 0.0f, 0.2f);
      add(p + "self_attn.qkv_proj.weight", {q + 2 * kv, h}, 0.0f, 0.4f);
      add(p + "self_attn.qkv_proj.bias", {q + 2 * kv}, 0.0f, 0.3f);
      add(p + "self_attn.o_proj.weight", {h, q}, 0.0f, 0.2f);
      add(p + "self_attn.o_proj.bias", {h}, 0.0f, 0.2f);
      add(p + "mlp.up_proj.weight", {c.intermediate_size, h}, 0.0f, 0.3f);
      add(p + "mlp.up_proj.bias", {c.intermediate_size}, 0.0f, 0.3f);
      add(p + "mlp.down_proj.weight", {h, c.intermediate_size}, 0.0f, 0.2f);
      add(p + "mlp.down_proj.bias", {h}, 0.0f, 0.2f);
      continue;
    }
    add(p + "self_attn.q_proj.weight", {q, h}, 0.0f, 0.4f);
    add(p + "self_attn.k_proj.weight", {kv, h}, 0.0f, 0.4f);
    add(p + "self_attn.v_proj.weight", {kv, h}, 0.0f, 0.3f);
    add(p + "self_attn.o_proj.weight", {h, q}, 0.0f, 0.2f);
    if (c.attention_bias) {
      add(p + "self_attn.q_proj.bias", {q}, 0.0f, 0.3f);
      add(p + "self_attn.k_proj.bias", {kv}, 0.0f, 0.3f);
      add(p + "self_attn.v_proj.bias", {kv}, 0.0f, 0.3f);
    }
    if (c.qk_norm) {
      add(p + "self_attn.q_norm.weight", {c.head_dim}, 1.0f, 0.2f);
      add(p + "self_attn.k_norm.weight", {c.head_dim}, 1.0f, 0.2f);
    }
    if (c.num_experts == 0) {
      add(p + "mlp.gate_proj.weight", {c.intermediate_size, h}, 0.0f, 0.3f);
      add(p + "mlp.up_proj.weight", {c.intermediate_size, h}, 0.0f, 0.3f);
      add(p + "mlp.down_proj.weight", {h, c.intermediate_size}, 0.0f, 0.2f);
      continue;
    }
    // Experts under each family's checkpoint names (Mixtral: w1 gate, w3 up, w2 down).
    const bool mixtral = c.architecture == "mixtral" || c.architecture == "MixtralForCausalLM";
    const std::string block = p + (mixtral ? "block_sparse_moe." : "mlp.");
    const int64_t ie = c.expert_intermediate_size();
    add(block + "gate.weight", {c.num_experts, h}, 0.0f, 0.5f);
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::string x = block + "experts." + std::to_string(e) + ".";
      add(x + (mixtral ? "w1" : "gate_proj") + ".weight", {ie, h}, 0.0f, 0.3f);
      add(x + (mixtral ? "w3" : "up_proj") + ".weight", {ie, h}, 0.0f, 0.3f);
      add(x + (mixtral ? "w2" : "down_proj") + ".weight", {h, ie}, 0.0f, 0.2f);
    }
  }
  return w;
}

// One sequence's state against a paged cache: its tokens, its (random) blocks, how many of
// its tokens are already in the cache.
struct SeqState {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
  int32_t computed = 0;
};

// Hands out distinct block ids in random order from [0, num_blocks).
class RandomBlocks {
 public:
  RandomBlocks(int64_t num_blocks, uint32_t seed) : ids_(static_cast<size_t>(num_blocks)) {
    std::iota(ids_.begin(), ids_.end(), 0);
    std::mt19937 rng(seed);
    std::shuffle(ids_.begin(), ids_.end(), rng);
  }
  int32_t take() {
    if (next_ >= ids_.size()) throw std::runtime_error("test ran out of KV blocks");
    return ids_[next_++];
  }

 private:
  std::vector<int32_t> ids_;
  size_t next_ = 0;
};

// One step in which each (sequence, n) computes its next n tokens; logits for every new token.
inline ForwardBatch make_step(const std::vector<std::pair<SeqState*, int32_t>>& work,
                              int32_t block_size, RandomBlocks& pool) {
  ForwardBatch b;
  b.query_start.push_back(0);
  for (auto& [seq, n] : work) {
    const int32_t end = seq->computed + n;
    while (static_cast<int64_t>(seq->blocks.size()) * block_size < end) {
      seq->blocks.push_back(pool.take());
    }
    b.max_blocks_per_seq =
        std::max<int32_t>(b.max_blocks_per_seq, static_cast<int32_t>(seq->blocks.size()));
  }
  for (auto& [seq, n] : work) {
    for (int32_t pos = seq->computed; pos < seq->computed + n; ++pos) {
      b.logits_indices.push_back(b.num_tokens());
      b.token_ids.push_back(seq->tokens[static_cast<size_t>(pos)]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(
          static_cast<int64_t>(seq->blocks[static_cast<size_t>(pos / block_size)]) * block_size +
          pos % block_size);
    }
    seq->computed += n;
    b.query_start.push_back(b.num_tokens());
    b.context_lens.push_back(seq->computed);
    for (int32_t i = 0; i < b.max_blocks_per_seq; ++i) {
      b.block_tables.push_back(
          i < static_cast<int32_t>(seq->blocks.size()) ? seq->blocks[static_cast<size_t>(i)] : -1);
    }
  }
  return b;
}

inline std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = dist(rng);
  return t;
}

}  // namespace inflight::testing
