// LlamaModel (model/llama.h): construction (this rank's shard and stage), and the graph of one
// step, layer by layer, from the embedding (or the stage before) to the logits (or the stage
// after). The parts it assembles live beside it, one concept a file:
//   llama_weights.cc        weights from a checkpoint (plan, check, load)
//   llama_dummy_weights.cc  random weights of the real shapes, and their bytes
//   llama_attention.cc      RoPE / ALiBi positions and the attention block
//   llama_mlp.cc            the SwiGLU, GELU and mixture-of-experts MLPs
//   llama_norm.cc           RMSNorm / LayerNorm fused with the residual add; logit_scale
//   llama_workspace.cc      the step's activation buffers, sized and reserved from one list
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/check.h"
#include "model/llama.h"

namespace inflight {

LlamaModel::LlamaModel(const ModelConfig& config, const WeightSource& weights, Backend& backend,
                       const ModelParallelism& parallel)
    : Model(backend), config_(config) {
  init_shard(parallel);
  load_weights(weights);
}

LlamaModel::LlamaModel(const ModelConfig& config, Backend& backend, uint64_t seed,
                       const ModelParallelism& parallel)
    : Model(backend), config_(config) {
  init_shard(parallel);
  init_random_weights(seed);
}

void LlamaModel::init_shard(const ModelParallelism& parallel) {
  check_config();
  const auto many = [](Communicator* c) {
    return c != nullptr && c->world_size() > 1 ? c : nullptr;
  };
  tp_ = many(parallel.tp);
  pp_ = many(parallel.pp);
  shard_ = tp_ != nullptr ? TensorParallelShard::of(config_, tp_->rank(), tp_->world_size())
                          : TensorParallelShard::of(config_, 0, 1);
  stage_ = pp_ != nullptr ? PipelineStage::of(config_, pp_->rank(), pp_->world_size())
                          : PipelineStage::of(config_, 0, 1);
  local_ = shard_.apply(config_);
  local_.num_layers = stage_.num_layers();
}

void LlamaModel::all_reduce(const Tensor& t) {
  if (tp_ != nullptr) tp_->all_reduce(t, ReduceOp::kSum);
}

void LlamaModel::check_config() const {
  // Positive sizes of at most 2^31 - 1 (sliding_window and vocab_size included) whose products
  // fit int64, GQA divisibility, even head_dim, RoPE scaling parameters.
  config_.validate();
  if (has_experts()) {
    INFLIGHT_CHECK_CODE(config_.num_experts_per_token >= 1, ErrorCode::kInvalidFile,
                        "model config: {} experts but num_experts_per_tok is {}",
                        config_.num_experts, config_.num_experts_per_token);
    INFLIGHT_CHECK_CODE(
        config_.num_experts <= kMoeMaxExperts && config_.num_experts_per_token <= kMoeMaxTopK,
        ErrorCode::kUnsupported,
        "model config: {} experts with {} per token (at most {} experts, {} per "
        "token are supported)",
        config_.num_experts, config_.num_experts_per_token, kMoeMaxExperts, kMoeMaxTopK);
  }
}

int64_t LlamaModel::weight_bytes() const {
  int64_t bytes =
      static_cast<int64_t>(embed_.nbytes() + final_norm_.nbytes() + final_norm_bias_.nbytes() +
                           inv_freq_.nbytes() + alibi_slopes_.nbytes());
  if (lm_head_.weight.raw() != embed_.raw()) bytes += lm_head_.nbytes();
  for (const Layer& l : layers_) {
    bytes += static_cast<int64_t>(l.input_norm.nbytes() + l.post_norm.nbytes() +
                                  l.input_norm_bias.nbytes() + l.post_norm_bias.nbytes());
    bytes += l.qkv.nbytes() + l.o.nbytes() + l.gate_up.nbytes() + l.down.nbytes();
    bytes += static_cast<int64_t>(l.q_norm.nbytes() + l.k_norm.nbytes());
    bytes += l.router.nbytes() + l.experts_gate_up.nbytes() + l.experts_down.nbytes();
  }
  return bytes;
}

QuantizedActivations LlamaModel::activations_for(const Tensor& x, const Linear& w) const {
  return activations_for(x.size(0), x.size(1), w);
}

QuantizedActivations LlamaModel::activations_for(int64_t t, int64_t k, const Linear& w) const {
  const int64_t groups = w.block_cols > 0 ? (k + w.block_cols - 1) / w.block_cols : 1;
  const Tensor scales = ws_.xq_scales.rows(0, groups * t);
  return {ws_.xq.rows(0, t * k).reshape({t, k}),
          w.block_cols > 0 ? scales.reshape({groups, t}) : scales};
}

void LlamaModel::project(const Tensor& x, const Linear& w, const Tensor& y, bool x_quantized) {
  if (!w.quantized()) {
    backend_.gemm(x, w, y);
    return;
  }
  const QuantizedActivations q = activations_for(x, w);
  if (!x_quantized) quantize_for(backend_, x, w, q);
  // x's quantized rows and y are views of rows [0, T) of this step's workspaces, whose rows
  // past T are scratch: the product may run on more of them (Backend::gemm_padded_rows).
  const int64_t t = x.size(0);
  const int64_t rows = std::min(backend_.gemm_padded_rows(w, t), ws_.capacity);
  if (rows == t) {
    backend_.gemm(q, w, y);
    return;
  }
  backend_.gemm(activations_for(rows, x.size(1), w), w,
                Tensor::wrap(y.raw(), {rows, y.size(1)}, y.dtype(), y.device(), y.owner()));
}

Tensor LlamaModel::run(const StepInputs& in, KvCache& cache, const std::atomic<bool>* abandon) {
  const ModelConfig& c = local_;  // this rank's heads, MLP width and vocabulary columns
  const int64_t t = in.num_tokens, num_logits = in.num_logits;
  INFLIGHT_CHECK(t <= ws_.capacity && num_logits <= ws_.logits_capacity,
                 "step of {} tokens / {} logits rows exceeds the reserved workspace ({} / {})", t,
                 num_logits, ws_.capacity, ws_.logits_capacity);
  // The residual stream; its norm, a sublayer's input; the last sublayer's output, added into
  // the stream by the next norm. All [T, hidden].
  const Tensor residual = ws_.residual.rows(0, t);
  const Tensor normed = ws_.normed.rows(0, t);
  const Tensor sublayer_out = ws_.sublayer_out.rows(0, t);

  if (stage_.first()) {
    backend_.gather_rows(embed_, in.token_ids, residual, shard_.vocab.begin);
    if (shard_.vocab_parallel()) all_reduce(residual);  // each rank looked up its ids only
  } else {  // the residual stream of the stage before: residual and the last MLP's output
    pp_->recv(residual, stage_.stage - 1);
    pp_->recv(sublayer_out, stage_.stage - 1);
  }
  const bool may_abandon = abandon != nullptr && !backend_.asynchronous();
  for (int64_t l = 0; l < c.num_layers; ++l) {  // this stage's layers, from layer_begin
    if (may_abandon && abandon->load(std::memory_order_relaxed)) throw StepAbandoned();
    const Layer& layer = layers_[static_cast<size_t>(l)];
    // Layer 0 normalises the embeddings; later layers first add the previous MLP output.
    const bool model_first = stage_.layer_begin + l == 0;
    const bool qkv_input = norm(model_first ? nullptr : &sublayer_out, residual, layer.input_norm,
                                layer.input_norm_bias, normed, &layer.qkv);
    attention(layer, l, in, cache, normed, qkv_input, sublayer_out);
    all_reduce(sublayer_out);
    const bool mlp_input = norm(&sublayer_out, residual, layer.post_norm, layer.post_norm_bias,
                                normed, has_experts() ? nullptr : &layer.gate_up);
    mlp(layer, normed, mlp_input, sublayer_out);
    all_reduce(sublayer_out);
  }
  const Tensor logits = ws_.logits.rows(0, num_logits);
  if (!stage_.last()) {  // on to the next stage
    pp_->send(residual, stage_.stage + 1);
    pp_->send(sublayer_out, stage_.stage + 1);
    return logits;
  }
  if (num_logits > 0) {
    norm(&sublayer_out, residual, final_norm_, final_norm_bias_, normed);
    const Tensor picked = ws_.picked.rows(0, num_logits);
    backend_.gather_rows(normed, in.logits_indices, picked);
    backend_.gemm(picked, lm_head_, logits);  // f32 out
  }
  return logits;
}

}  // namespace inflight
