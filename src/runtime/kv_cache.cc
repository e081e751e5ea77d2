#include "runtime/kv_cache.h"

namespace inflight {

KvCache::KvCache(Backend& backend, int64_t num_layers, int64_t num_blocks, int32_t block_size,
                 int64_t num_kv_heads, int64_t head_dim)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      num_kv_heads_(num_kv_heads),
      head_dim_(head_dim) {
  INFLIGHT_CHECK_CODE(
      num_layers > 0 && num_blocks > 0 && block_size > 0 && num_kv_heads > 0 && head_dim > 0,
      ErrorCode::kInvalidArgument,
      "kv cache: layers={} blocks={} block_size={} kv_heads={} head_dim={} must "
      "all be positive",
      num_layers, num_blocks, block_size, num_kv_heads, head_dim);
  const Shape layer_shape = {num_blocks, block_size, num_kv_heads, head_dim};
  storage_ = backend.alloc({num_layers * 2, num_blocks, block_size, num_kv_heads, head_dim},
                           backend.compute_dtype());
  for (int64_t l = 0; l < num_layers; ++l) {
    keys_.push_back(storage_.rows(2 * l, 2 * l + 1).reshape(layer_shape));
    values_.push_back(storage_.rows(2 * l + 1, 2 * l + 2).reshape(layer_shape));
  }
}

KvCache::KvCache(Backend& backend, const ModelConfig& config, int64_t num_blocks,
                 int32_t block_size)
    : KvCache(backend, config.num_layers, num_blocks, block_size, config.num_kv_heads,
              config.head_dim) {}

int64_t KvCache::bytes_per_block(const ModelConfig& config, int32_t block_size, DType dtype) {
  return 2 * config.num_layers * block_size * config.num_kv_heads * config.head_dim *
         static_cast<int64_t>(dtype_size(dtype));
}

const Tensor& KvCache::key(int64_t layer) const {
  INFLIGHT_CHECK(layer >= 0 && layer < num_layers(), "kv cache: layer {} out of range [0, {})",
                 layer, num_layers());
  return keys_[static_cast<size_t>(layer)];
}

const Tensor& KvCache::value(int64_t layer) const {
  INFLIGHT_CHECK(layer >= 0 && layer < num_layers(), "kv cache: layer {} out of range [0, {})",
                 layer, num_layers());
  return values_[static_cast<size_t>(layer)];
}

}  // namespace inflight
