// LlamaModel: the decoder-only transformer graph of the Llama family (Llama 2/3/3.1, SmolLM2,
// Mistral, Qwen2: one graph with switches), written against the abstract Backend.
//
// One step over a ragged batch (T tokens, see forward_batch.h), per layer:
//   residual += sublayer output; x = rms_norm(residual)            (fused, ops/rms_norm.h)
//   qkv = x Wqkv^T (+ b)                  [T, (H + 2 KH) D]   fused q/k/v projection
//   q = rope(q); cache[slot] = rope(k), v                      (ops/rope_kv_write.h)
//   a = paged_attention(q, cache)         [T, H, D]
//   o = a Wo^T                            [T, hidden]
//   residual += o; x = rms_norm(residual)
//   m = down(silu(x Wgate^T) * x Wup^T)   fused [gate; up] weight [2 I, hidden]
// then residual += m, the final norm, the rows in logits_indices, and the LM head (the token
// embedding itself when tied) into f32 logits.
//
// A step is split into host work (validation, padding, the one upload of the step's inputs:
// enqueue()) and the ops (run_ops(): nothing but backend ops on fixed tensors), so that decode
// steps can be captured once and replayed as graphs (model/decode_graphs.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "model/decode_graphs.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/model_files.h"

namespace inflight {

// RoPE inverse frequencies [head_dim / 2] for config.rope_theta and config.rope_scaling
// (none, linear, llama3), computed in f32 the way the Hugging Face reference computes them.
std::vector<float> rope_inv_freq(const ModelConfig& config);

class LlamaModel {
 public:
  // Host f32 weights by canonical name (model_files.h), e.g. "model.layers.0.mlp.up_proj.weight".
  using WeightMap = std::unordered_map<std::string, Tensor>;

  // Loads and uploads every weight through files.load_f32, one tensor at a time, so the host
  // holds at most one fused f32 tensor (and its parts) at once. Throws Error(kUnsupported) for
  // architectures other than llama/mistral/qwen2, Error(kNotFound / kInvalidFile) naming a missing
  // or misshapen tensor.
  LlamaModel(const ModelFiles& files, Backend& backend);
  // Weights supplied directly (tests); same checks.
  LlamaModel(const ModelConfig& config, const WeightMap& weights, Backend& backend);
  // Dummy weights for performance work: every tensor allocated on the backend and filled there
  // (Backend::fill_random) from `seed`: linear layers uniform with scale 1/sqrt(fan_in), norm
  // weights 1 +- 0.1, embeddings +-1, so activations stay finite through any number of layers.
  LlamaModel(const ModelConfig& config, Backend& backend, uint64_t seed);

  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  const ModelConfig& config() const { return config_; }
  Backend& backend() const { return backend_; }

  // A KV cache shaped for this model on its backend.
  KvCache make_kv_cache(int64_t num_blocks, int32_t block_size) const;

  // How decode steps run (model/decode_graphs.h); kCapture needs Backend::supports_graphs().
  // Default kOff. Drops the graphs recorded so far.
  void set_graph_mode(GraphMode mode, int32_t max_batch);
  const DecodeGraphs& graphs() const { return graphs_; }

  // A flag polled between layers of steps on a synchronous backend (CPU), where one step can
  // take seconds: once it is true the step throws StepAbandoned. Asynchronous backends only
  // enqueue work, so they ignore it. Null (the default): never abandon.
  void set_abandon_flag(const std::atomic<bool>* flag) { abandon_ = flag; }

  // Allocates the workspace for steps of up to `max_tokens` tokens and `max_logits` logits rows
  // (decode buckets included), so that no step allocates and graphs keep their addresses.
  void reserve(int32_t max_tokens, int32_t max_logits);
  // Bytes of the weights on the device, and of the workspace reserve() would allocate.
  int64_t weight_bytes() const;
  int64_t workspace_bytes(int32_t max_tokens, int32_t max_logits) const;

  // Enqueues one step on the backend (host work, then the ops or a graph replay; no host wait)
  // and returns the device f32 logits [batch.logits_indices.size(), vocab_size], row i for token
  // logits_indices[i]: a workspace view, valid until the next step.
  // Throws Error(kInvalidArgument) for a batch that breaks ForwardBatch's invariants, token ids
  // outside the vocabulary, or a cache shaped for another model.
  // NOTE: one step at a time: the activations live in a workspace reused by every call.
  Tensor enqueue(const ForwardBatch& batch, KvCache& cache);

  // enqueue(), then the logits copied to a host f32 tensor (waits for the device).
  Tensor forward(const ForwardBatch& batch, KvCache& cache);

 private:
  // Returns the host f32 tensor `name`, or an undefined Tensor when absent and !required.
  using WeightSource = std::function<Tensor(const std::string& name, bool required)>;

  struct Layer {
    Tensor input_norm;      // [hidden]
    Tensor qkv_weight;      // [(H + 2 KH) D, hidden]
    Tensor qkv_bias;        // [(H + 2 KH) D] or undefined
    Tensor o_weight;        // [hidden, H D]
    Tensor o_bias;          // [hidden] or undefined
    Tensor post_norm;       // [hidden]
    Tensor gate_up_weight;  // [2 I, hidden]
    Tensor down_weight;     // [hidden, I]
  };

  // Activations of one step, allocated for `capacity` tokens and viewed for fewer.
  struct Workspace {
    int64_t capacity = 0;  // tokens
    int64_t logits_capacity = 0;
    Tensor residual;      // [cap, hidden]
    Tensor normed;        // [cap, hidden]
    Tensor qkv;           // [cap, (H + 2 KH) D]
    Tensor q;             // [cap, H, D]
    Tensor attn;          // [cap, H, D]
    Tensor sublayer_out;  // [cap, hidden]: o_proj, then down_proj output
    Tensor gate_up;       // [cap, 2 I]
    Tensor act;           // [cap, I]
    Tensor picked;        // [logits_cap, hidden]
    Tensor logits;        // [logits_cap, vocab] f32
  };

  LlamaModel(const ModelConfig& config, const WeightSource& source, Backend& backend);
  void check_config() const;
  void load_weights(const WeightSource& source);
  void init_random_weights(uint64_t seed);
  void ensure_workspace(int64_t num_tokens, int64_t num_logits);
  void check_cache(const KvCache& cache) const;
  // The decode step of `batch` in its bucket: padded, uploaded, then replayed or run.
  Tensor enqueue_decode(const ForwardBatch& batch, KvCache& cache,
                        const DecodeGraphs::Bucket& bucket);
  // Every op of one step over `in` (t tokens, num_logits logits rows): no host-side work.
  void run_ops(const StepInputs& in, KvCache& cache, int64_t t, int64_t num_logits);

  ModelConfig config_;
  Backend& backend_;
  Tensor embed_;       // [vocab, hidden]
  Tensor lm_head_;     // [vocab, hidden]; shares embed_ when tied
  Tensor final_norm_;  // [hidden]
  Tensor inv_freq_;    // [D / 2] f32
  std::vector<Layer> layers_;
  Workspace ws_;
  DecodeGraphs graphs_{GraphMode::kOff, 1};
  ForwardBatch padded_;  // scratch: the padded decode batch
  const std::atomic<bool>* abandon_ = nullptr;
};

}  // namespace inflight
