// ModelRunner: what the engine needs from a model on a device, nothing more.
//
// The engine owns block ids and builds each step's ForwardBatch; the runner owns the weights,
// the backend and the KV cache storage. A step is split in two so that an asynchronous backend
// can run step N on the device while the engine does host work:
//
//   runner.begin_step(batch);          // enqueue the step (may return before it ran)
//   ... host work that does not touch this step's sequences ...
//   Tensor logits = runner.end_step(); // wait; host f32 [batch.logits_indices.size(), vocab]
//
// The CUDA backend plugs in as another implementation; the engine does not change.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/tensor.h"
#include "model/forward_batch.h"
#include "model/model_config.h"

namespace inflight {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const ModelConfig& model_config() const = 0;
  // "cpu", "cuda:0", ... for logs and stats.
  virtual std::string_view device_name() const = 0;

  // Bytes one KV block of `block_size` tokens takes (all layers, K and V).
  virtual int64_t kv_bytes_per_block(int32_t block_size) const = 0;
  // Allocates the paged KV cache. Called once, before the first step. Throws Error
  // (kOutOfMemory, kInvalidArgument) when it cannot.
  virtual void init_kv_cache(int64_t num_blocks, int32_t block_size) = 0;

  // Starts one step. `batch` stays alive and unchanged until end_step() returns.
  virtual void begin_step(const ForwardBatch& batch) = 0;
  // Finishes the step begun last: host f32 logits [batch.logits_indices.size(), vocab], valid
  // until the next begin_step(). Throws Error when the step failed.
  virtual Tensor end_step() = 0;
};

}  // namespace inflight
