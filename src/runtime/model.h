// Model: one architecture's weights on a backend and the op sequence of one step over them.
//
// A model is only that: model/ has one file per architecture and a registry (model/registry.h)
// that builds them. Everything around a step (validating the batch, uploading its inputs,
// padding decode steps to graph buckets, capturing and replaying graphs, bringing the logits
// back) belongs to the runner (runtime/device_runner.h), the same for every architecture.
//
// run() enqueues nothing but backend ops on fixed tensors (no host work, no allocation), so
// that a decode step can be captured once and replayed: its activations live in a workspace
// the runner sizes through reserve() before any step.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/tensor.h"
#include "formats/model_config.h"
#include "runtime/backend.h"
#include "runtime/forward_batch.h"
#include "runtime/kv_cache.h"
#include "runtime/model_runner.h"  // StepAbandoned
#include "runtime/step_inputs.h"

namespace inflight {

class Model {
 public:
  explicit Model(Backend& backend) : backend_(backend) {}
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // The resolved config (architecture: the registry's family name).
  virtual const ModelConfig& config() const = 0;
  // What this rank computes under tensor parallelism (model/tensor_parallel.h): config() with
  // the attention heads, KV heads, MLP width and vocabulary columns of its shard (config() on
  // one rank). The KV cache holds shard_config().num_kv_heads heads.
  virtual const ModelConfig& shard_config() const { return config(); }
  // The vocabulary id of the first logits column run() returns.
  virtual int64_t vocab_begin() const { return 0; }
  // Whether run() returns logits: false on pipeline stages before the last, whose run() sends
  // their activations on (its return value is then a placeholder [num_logits, 1]).
  virtual bool last_stage() const { return true; }
  Backend& backend() const { return backend_; }

  // Bytes of the weights on the device.
  virtual int64_t weight_bytes() const = 0;
  // Bytes of the workspace for steps of up to `tokens` tokens and `logits` logits rows.
  virtual int64_t workspace_bytes(int64_t tokens, int64_t logits) const = 0;
  // Makes the workspace hold steps of up to `tokens` tokens and `logits` rows (never shrinks).
  // Returns true when it allocated: addresses changed, so recorded graphs are stale.
  virtual bool reserve(int64_t tokens, int64_t logits) = 0;

  // Enqueues every op of one step over `in` (in.num_tokens tokens, in.num_logits logits rows,
  // both within the reserved workspace) and returns the f32 logits [in.num_logits,
  // shard_config().vocab_size] (columns from vocab_begin()): a
  // workspace view, valid until the next step. `abandon` (may be null) is polled between layers
  // on a synchronous backend: once it is true, run() throws StepAbandoned.
  virtual Tensor run(const StepInputs& in, KvCache& cache, const std::atomic<bool>* abandon) = 0;

  // A KV cache shaped for this model (this rank's shard) on its backend, and the bytes of one
  // of its blocks.
  KvCache make_kv_cache(int64_t num_blocks, int32_t block_size) const;
  int64_t kv_bytes_per_block(int32_t block_size) const;
  // Throws Error(kInvalidArgument) for a batch that breaks ForwardBatch's invariants, token ids
  // outside the vocabulary, or a cache shaped for another model or device.
  void check_step(const ForwardBatch& batch, const KvCache& cache) const;

  // One eager step (tests, tools): check_step, reserve, upload, run, and the logits copied to a
  // host f32 tensor [logits rows, shard vocab] (waits for the device).
  Tensor forward(const ForwardBatch& batch, KvCache& cache);

 protected:
  Backend& backend_;
};

}  // namespace inflight
