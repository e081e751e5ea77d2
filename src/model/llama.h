// LlamaModel: the decoder-only transformer of the Llama family (Llama 2/3/3.1, SmolLM2,
// Mistral, Qwen2, Qwen3, the mixture-of-experts Mixtral and Qwen3-MoE, and MPT: one graph with
// switches), written against the abstract Backend.
//
// One step over a ragged batch (T tokens, see runtime/forward_batch.h), per layer:
//   residual += sublayer output; x = rms_norm(residual)            (fused, ops/rms_norm.h)
//   qkv = x Wqkv^T (+ b)                  [T, (H + 2 KH) D]   fused q/k/v projection
//   q, k = rms_norm per head (q_norm, k_norm)                  (Qwen3: config.qk_norm)
//   q = rope(q); cache[slot] = rope(k), v                      (ops/rope_kv_write.h)
//   a = paged_attention(q, cache)         [T, H, D]
//   o = a Wo^T (+ b)                      [T, hidden]
//   residual += o; x = rms_norm(residual)
//   dense:   m = down(silu(x Wgate^T) * x Wup^T)   fused [gate; up] weight [2 I, hidden]
//   experts: (config.num_experts > 0: Mixtral, Qwen3-MoE)
//            ids, w = top-k(softmax(x Wrouter^T))   [T, k]     (ops/moe_route.h)
//            m = sum_j w[:, j] expert_{ids[:, j]}(x)           (ops/moe_experts.h)
//            each expert a SwiGLU MLP of width I_e, weights stacked [E, 2 I_e, hidden] and
//            [E, hidden, I_e]
// then residual += m, the final norm, the rows in logits_indices, and the LM head (the token
// embedding itself when tied) into f32 logits.
//
// MPT's switches (config.norm, config.positions, config.mlp): LayerNorm (+ bias) in place of
// RMSNorm; qkv clamped to [-clip_qkv, clip_qkv] when set; no rotation (inv_freq of zeros: the
// fused kernel's rotation is then the identity, cos 0 = 1 and sin 0 = 0 exactly, so it only
// writes k/v) and ALiBi slopes in the attention, scaled by softmax_scale when set; the MLP
// m = down(gelu(x Wup^T)) with biases unless no_bias; logit_scale folded into the final norm's
// weight and bias at load.
//
// Tensor parallelism (model/tensor_parallel.h): built with a communicator of T ranks, the model
// holds rank r's shard (loaded from slices of the stored tensors, so no rank holds the whole
// model) and sums the row-parallel outputs with all-reduces: after o (attention) and after down
// (the MLP, dense or experts), and after the embedding lookup when the vocabulary is split.
// Pipeline parallelism (model/pipeline_stage.h): built as stage s of P, it holds its layers only;
// a stage after the first receives the residual and the last sublayer's output from the one
// before, and a stage before the last sends them on instead of computing logits.
//
// Sources, one concept a file: llama.cc (construction and the step's graph), llama_weights.cc,
// llama_dummy_weights.cc, llama_attention.cc, llama_mlp.cc, llama_norm.cc, llama_workspace.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "model/pipeline_stage.h"
#include "model/tensor_parallel.h"
#include "model/weight_source.h"
#include "runtime/communicator.h"
#include "runtime/linear.h"
#include "runtime/model.h"
#include "runtime/moe_workspace.h"

namespace inflight {

// RoPE inverse frequencies [head_dim / 2] for config.rope_theta and config.rope_scaling
// (none, linear, llama3), computed in f32 the way the Hugging Face reference computes them.
std::vector<float> rope_inv_freq(const ModelConfig& config);

class LlamaModel final : public Model {
 public:
  // Loads every weight from `weights` into the backend's weight format, one stored tensor at a
  // time (fused q/k/v and gate/up are written into row ranges of one device tensor). Throws
  // Error(kNotFound / kInvalidFile) naming a missing or misshapen tensor. `parallel`: this
  // rank's tensor-parallel group and pipeline (null: one rank, one stage); they must outlive
  // the model.
  LlamaModel(const ModelConfig& config, const WeightSource& weights, Backend& backend,
             const ModelParallelism& parallel = {});
  // Dummy weights for performance work: every tensor allocated on the backend and filled there
  // (Backend::fill_random) from `seed`: linear layers uniform with scale 1/sqrt(fan_in), norm
  // weights 1 +- 0.1, embeddings +-1, so activations stay finite through any number of layers.
  LlamaModel(const ModelConfig& config, Backend& backend, uint64_t seed,
             const ModelParallelism& parallel = {});

  // Bytes of dummy weights of one rank's shard (`shard`: its shard_config(), the layers of its
  // pipeline stage) in `dtype`, with FP8 linear layers when `fp8`, on the first and/or last
  // pipeline stage: what the memory plan of each rank counts.
  static int64_t dummy_weight_bytes(const ModelConfig& shard, DType dtype, bool fp8,
                                    bool first_stage = true, bool last_stage = true);

  const ModelConfig& config() const override { return config_; }
  const ModelConfig& shard_config() const override { return local_; }
  int64_t vocab_begin() const override { return shard_.vocab.begin; }
  bool last_stage() const override { return stage_.last(); }
  int64_t weight_bytes() const override;
  int64_t workspace_bytes(int64_t tokens, int64_t logits) const override;
  bool reserve(int64_t tokens, int64_t logits) override;
  Tensor run(const StepInputs& in, KvCache& cache, const std::atomic<bool>* abandon) override;

 private:
  struct Layer {
    Tensor input_norm;       // [hidden]
    Linear qkv;              // [(H + 2 KH) D, hidden] (+ bias)
    Linear o;                // [hidden, H D] (+ bias)
    Tensor post_norm;        // [hidden]
    Linear gate_up;          // [2 I, hidden] (dense MLP); the GELU MLP's up alone, [I, hidden]
    Linear down;             // [hidden, I]
    Tensor input_norm_bias;  // [hidden] (LayerNorm with config.norm_bias)
    Tensor post_norm_bias;   // [hidden]
    Tensor q_norm;           // [D] (config.qk_norm)
    Tensor k_norm;           // [D]
    // Mixture of experts instead of gate_up / down (config.num_experts E > 0), I_e wide:
    Linear router;  // [E, hidden], the compute dtype (never FP8), f32 logits out
    // The experts' stacked weights (weight [E, 2 I_e, hidden]: each expert's [gate; up], and
    // [E, hidden, I_e]), in the compute dtype or e4m3 with scales over the stacked rows
    // (weight-only FP8, ops/moe_experts.h).
    Linear experts_gate_up;
    Linear experts_down;
  };

  // Activations of one step, allocated for `capacity` tokens and viewed for fewer.
  struct Workspace {
    int64_t capacity = 0;  // tokens
    int64_t logits_capacity = 0;
    Tensor residual;        // [cap, hidden]
    Tensor normed;          // [cap, hidden]
    Tensor qkv;             // [cap, (H + 2 KH) D]
    Tensor q;               // [cap, H, D]
    Tensor attn;            // [cap, H, D]
    Tensor sublayer_out;    // [cap, hidden]: o_proj, then down_proj output
    Tensor gate_up;         // [cap, 2 I] (dense MLP)
    Tensor act;             // [cap, I]
    Tensor router_logits;   // [cap, E] f32 (mixture of experts)
    Tensor expert_ids;      // [cap, k] i32
    Tensor expert_weights;  // [cap, k] f32
    MoeWorkspace moe;       // runtime/moe_workspace.h, for cap tokens
    Tensor xq;              // [cap * max K] f8_e4m3: an FP8 layer's input (empty without FP8)
    Tensor xq_scales;       // [cap * max groups] f32: its scales
    Tensor picked;          // [logits_cap, hidden]
    Tensor logits;          // [logits_cap, vocab] f32
  };
  // One workspace buffer: where it goes, its shape and dtype. The one list that both sizes
  // (workspace_bytes) and allocates (reserve) the workspace.
  struct Buffer {
    Tensor Workspace::*member;
    Shape shape;
    DType dtype;
  };
  std::vector<Buffer> token_buffers(int64_t capacity) const;
  std::vector<Buffer> logits_buffers(int64_t capacity) const;

  void check_config() const;
  // Checks the config and plans this rank's shard and stage.
  void init_shard(const ModelParallelism& parallel);
  // Sums `t` over the tensor-parallel ranks (nothing on one rank).
  void all_reduce(const Tensor& t);
  // Plans every weight (lookup and shape check), checks that they fit the device, then
  // allocates and loads.
  void load_weights(const WeightSource& source);
  // Whether dummy linear layers are quantized (config().quantization online FP8); throws when
  // that cannot be done.
  bool quantizes_dummy_linears() const;
  int64_t dummy_weight_bytes() const;
  void init_random_weights(uint64_t seed);
  // inv_freq [D / 2] f32 on the device, each divided by `divisors[i]` when given; for ALiBi
  // models zeros, and the slopes of this rank's heads.
  void set_positions(const Tensor* divisors);
  // residual += add (may be null); out = the config's norm (RMSNorm, or LayerNorm with `bias`).
  // When `next` (the layer that reads out) is FP8, out also goes quantized for it into the
  // workspace (activations_for), in the norm's pass where the backend fuses them; returns
  // whether it did.
  bool norm(const Tensor* add, const Tensor& residual, const Tensor& weight, const Tensor& bias,
            const Tensor& out, const Linear* next = nullptr);
  // MPT's logit_scale, folded into the final norm's weight and bias.
  void fold_logit_scale();
  bool gelu_mlp() const { return config_.mlp == ModelConfig::Mlp::kGelu; }
  bool has_qkv_bias() const { return config_.attention_bias; }
  bool has_experts() const { return config_.num_experts > 0; }
  std::vector<MoeWorkspaceBuffer> moe_buffers(int64_t capacity) const;
  // Layer `l`'s attention block (of this stage; its KV cache is cache.layer(l)): q/k/v
  // projection, RoPE and the KV cache write, paged attention, o projection.
  // x [T, hidden] -> out [T, hidden], this rank's part (not yet summed over the ranks).
  // x_quantized: the workspace holds x quantized for the first projection (norm's `next`).
  void attention(const Layer& layer, int64_t l, const StepInputs& in, KvCache& cache,
                 const Tensor& x, bool x_quantized, const Tensor& out);
  // The layer's MLP: dense, or routed to experts. x [T, hidden] -> out [T, hidden].
  void mlp(const Layer& layer, const Tensor& x, bool x_quantized, const Tensor& out);
  // y = x W^T through the layer's format: a plain GEMM, or x quantized into the workspace
  // (unless x_quantized: done by the op that made x) and the FP8 GEMM (runtime/linear.h).
  void project(const Tensor& x, const Linear& w, const Tensor& y, bool x_quantized = false);
  // The workspace views that hold x [T, K] quantized for the FP8 layer w.
  QuantizedActivations activations_for(const Tensor& x, const Linear& w) const;
  QuantizedActivations activations_for(int64_t t, int64_t k, const Linear& w) const;
  int64_t max_in_features() const;
  int64_t max_scale_groups() const;  // activation scales per token of any FP8 layer

  ModelConfig config_;
  TensorParallelShard shard_;
  PipelineStage stage_;
  ModelConfig local_;  // this rank's shapes (shard_.apply(config_), the stage's layers)
  Communicator* tp_ = nullptr;
  Communicator* pp_ = nullptr;
  Tensor embed_;               // [shard vocab, hidden]
  Linear lm_head_;             // [shard vocab, hidden]; shares embed_ when tied
  Tensor final_norm_;          // [hidden]
  Tensor final_norm_bias_;     // [hidden] (LayerNorm with config.norm_bias)
  Tensor inv_freq_;            // [D / 2] f32 (zeros for ALiBi: the identity rotation)
  Tensor alibi_slopes_;        // [this rank's H] f32 (config.positions kAlibi)
  std::vector<Layer> layers_;  // the stage's, from stage_.layer_begin
  bool fp8_ = false;           // some linear layer is FP8
  Workspace ws_;
};

}  // namespace inflight
