// LlamaModel's workspace (model/llama.h): the activations of one step, allocated for a capacity
// of tokens and of logits rows and viewed for fewer. One list of buffers both sizes the
// workspace (workspace_bytes, for the memory plan) and allocates it (reserve).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/llama.h"

namespace inflight {

std::vector<LlamaModel::Buffer> LlamaModel::token_buffers(int64_t cap) const {
  const ModelConfig& c = local_;  // this rank's shard
  const DType dt = backend_.compute_dtype();
  const int64_t qkv_cols = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  // The dense MLP's buffers, or the router's (the experts' scratch: moe_buffers).
  const int64_t dense = has_experts() ? 1 : cap, moe = has_experts() ? cap : 1;
  // The GELU MLP projects into `act` and activates it in place.
  const int64_t gate_up_rows = gelu_mlp() ? 1 : dense;
  const int64_t k = std::max<int64_t>(c.num_experts_per_token, 1);
  return {{&Workspace::residual, {cap, c.hidden_size}, dt},
          {&Workspace::normed, {cap, c.hidden_size}, dt},
          {&Workspace::qkv, {cap, qkv_cols}, dt},
          {&Workspace::q, {cap, c.num_heads, c.head_dim}, dt},
          {&Workspace::attn, {cap, c.num_heads, c.head_dim}, dt},
          {&Workspace::sublayer_out, {cap, c.hidden_size}, dt},
          {&Workspace::gate_up, {gate_up_rows, 2 * c.intermediate_size}, dt},
          {&Workspace::act, {dense, c.intermediate_size}, dt},
          {&Workspace::router_logits, {moe, std::max<int64_t>(c.num_experts, 1)}, DType::kF32},
          {&Workspace::expert_ids, {moe, k}, DType::kI32},
          {&Workspace::expert_weights, {moe, k}, DType::kF32},
          // FP8 layers' inputs, quantized (runtime/linear.h): any layer's [t, K] fits.
          {&Workspace::xq, {fp8_ ? cap * max_in_features() : 1}, DType::kF8E4M3},
          {&Workspace::xq_scales, {fp8_ ? cap * max_scale_groups() : 1}, DType::kF32}};
}

std::vector<MoeWorkspaceBuffer> LlamaModel::moe_buffers(int64_t cap) const {
  const ModelConfig& c = local_;  // this rank's shard
  if (!has_experts()) return {};
  const bool fp8_experts = std::any_of(layers_.begin(), layers_.end(), [](const Layer& l) {
    return l.experts_gate_up.weight.defined() && l.experts_gate_up.weight.dtype() == DType::kF8E4M3;
  });
  return moe_workspace_buffers(cap, c.num_experts_per_token, c.num_experts, c.hidden_size,
                               c.expert_intermediate_size(), backend_.compute_dtype(), fp8_experts);
}

int64_t LlamaModel::max_in_features() const {
  const ModelConfig& c = local_;  // this rank's shard
  return std::max({c.hidden_size, c.num_heads * c.head_dim, c.intermediate_size});
}

int64_t LlamaModel::max_scale_groups() const {
  int64_t groups = 1;
  for (const Layer& l : layers_) {
    for (const Linear* w : {&l.qkv, &l.o, &l.gate_up, &l.down}) {
      if (w->block_cols > 0) {
        groups = std::max(groups, (w->in_features() + w->block_cols - 1) / w->block_cols);
      }
    }
  }
  return groups;
}

std::vector<LlamaModel::Buffer> LlamaModel::logits_buffers(int64_t cap) const {
  // A stage before the last returns a placeholder [rows, 1] (Model::last_stage).
  return {{&Workspace::picked, {cap, local_.hidden_size}, backend_.compute_dtype()},
          {&Workspace::logits, {cap, stage_.last() ? local_.vocab_size : 1}, DType::kF32}};
}

namespace {

// Capacities are rounded up so that a growing prompt does not reallocate every step, tokens to
// whole 128-row tiles (LlamaModel::project may run a product on them); at least one logits row,
// so that a step that samples nothing still has a [0, vocab] view.
int64_t token_capacity(int64_t tokens) {
  return (std::max<int64_t>(tokens, 1) + 127) / 128 * 128;
}
int64_t logits_capacity(int64_t logits) {
  return (std::max<int64_t>(logits, 1) + 7) / 8 * 8;
}

}  // namespace

int64_t LlamaModel::workspace_bytes(int64_t tokens, int64_t logits) const {
  int64_t bytes = 0;
  const auto add = [&bytes](const Shape& shape, DType dtype) {
    int64_t n = static_cast<int64_t>(dtype_size(dtype));
    for (const int64_t d : shape) n *= d;
    bytes += n;
  };
  for (const auto& list :
       {token_buffers(token_capacity(tokens)), logits_buffers(logits_capacity(logits))}) {
    for (const Buffer& b : list) add(b.shape, b.dtype);
  }
  for (const MoeWorkspaceBuffer& b : moe_buffers(token_capacity(tokens))) add(b.shape, b.dtype);
  return bytes;
}

bool LlamaModel::reserve(int64_t tokens, int64_t logits) {
  bool grew = false;
  if (tokens > ws_.capacity) {
    ws_.capacity = token_capacity(tokens);
    for (const Buffer& b : token_buffers(ws_.capacity))
      ws_.*b.member = backend_.alloc(b.shape, b.dtype);
    for (const MoeWorkspaceBuffer& b : moe_buffers(ws_.capacity))
      ws_.moe.*b.member = backend_.alloc(b.shape, b.dtype);
    grew = true;
  }
  if (std::max<int64_t>(logits, 1) > ws_.logits_capacity) {
    ws_.logits_capacity = logits_capacity(logits);
    for (const Buffer& b : logits_buffers(ws_.logits_capacity)) {
      ws_.*b.member = backend_.alloc(b.shape, b.dtype);
    }
    grew = true;
  }
  return grew;
}

}  // namespace inflight
