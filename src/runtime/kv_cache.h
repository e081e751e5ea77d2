// KvCache: the storage of the paged KV cache, per layer K and V of shape
//   [num_blocks, block_size, num_kv_heads, head_dim]   (NHD, see ops/paged_kv.h)
// on the backend's device, in the backend's compute dtype or in e4m3 (an FP8 cache) with a f32
// scale per (slot, kv head) beside the values ([num_blocks, block_size, num_kv_heads]). Which
// block belongs to which sequence is not known here: the engine's BlockPool owns block ids and
// hands them to the model through ForwardBatch block tables and slot mappings.
#pragma once

#include <cstdint>
#include <vector>

#include "formats/model_config.h"
#include "runtime/backend.h"
#include "runtime/kv_cache_layer.h"

namespace inflight {

class KvCache {
 public:
  // One allocation holding every layer's K and V (and one for their scales). The contents
  // start uninitialised: a slot is read only after a step wrote it. dtype: the backend's
  // compute dtype or kF8E4M3.
  KvCache(Backend& backend, int64_t num_layers, int64_t num_blocks, int32_t block_size,
          int64_t num_kv_heads, int64_t head_dim, DType dtype);
  // Shaped for a model: num_layers, num_kv_heads and head_dim from its config, e4m3 when its
  // quantization asks for an FP8 cache.
  KvCache(Backend& backend, const ModelConfig& config, int64_t num_blocks, int32_t block_size);

  // The element type a model's cache has on `backend`.
  static DType dtype_for(const ModelConfig& config, const Backend& backend);
  // Bytes one block takes over all layers (K and V, and their scales for e4m3), to size the
  // pool from a memory budget.
  static int64_t bytes_per_block(const ModelConfig& config, int32_t block_size, DType dtype);

  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  int64_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  int64_t num_kv_heads() const { return num_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  DType dtype() const { return storage_.dtype(); }
  Device device() const { return storage_.device(); }

  const KvCacheLayer& layer(int64_t layer) const;
  const Tensor& key(int64_t l) const { return layer(l).key; }
  const Tensor& value(int64_t l) const { return layer(l).value; }

 private:
  int64_t num_blocks_;
  int32_t block_size_;
  int64_t num_kv_heads_;
  int64_t head_dim_;
  Tensor storage_;  // [num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim]
  Tensor scales_;   // [num_layers, 2, num_blocks, block_size, num_kv_heads] f32 (e4m3 only)
  std::vector<KvCacheLayer> layers_;
};

}  // namespace inflight
