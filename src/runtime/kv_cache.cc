#include "runtime/kv_cache.h"

namespace inflight {

KvCache::KvCache(Backend& backend, int64_t num_layers, int64_t num_blocks, int32_t block_size,
                 int64_t num_kv_heads, int64_t head_dim, DType dtype)
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
  const bool fp8 = dtype == DType::kF8E4M3;
  INFLIGHT_CHECK_CODE(fp8 || dtype == backend.compute_dtype(), ErrorCode::kInvalidArgument,
                      "kv cache: dtype {} is neither the {} backend's compute dtype {} nor e4m3",
                      dtype_name(dtype), backend.name(), dtype_name(backend.compute_dtype()));
  const Shape layer_shape = {num_blocks, block_size, num_kv_heads, head_dim};
  const Shape scales_shape = {num_blocks, block_size, num_kv_heads};
  storage_ = backend.alloc({num_layers * 2, num_blocks, block_size, num_kv_heads, head_dim}, dtype);
  if (fp8) {
    scales_ = backend.alloc({num_layers * 2, num_blocks, block_size, num_kv_heads}, DType::kF32);
  }
  for (int64_t l = 0; l < num_layers; ++l) {
    KvCacheLayer& layer = layers_.emplace_back();
    layer.key = storage_.rows(2 * l, 2 * l + 1).reshape(layer_shape);
    layer.value = storage_.rows(2 * l + 1, 2 * l + 2).reshape(layer_shape);
    if (fp8) {
      layer.key_scales = scales_.rows(2 * l, 2 * l + 1).reshape(scales_shape);
      layer.value_scales = scales_.rows(2 * l + 1, 2 * l + 2).reshape(scales_shape);
    }
  }
}

KvCache::KvCache(Backend& backend, const ModelConfig& config, int64_t num_blocks,
                 int32_t block_size)
    : KvCache(backend, config.num_layers, num_blocks, block_size, config.num_kv_heads,
              config.head_dim, dtype_for(config, backend)) {}

DType KvCache::dtype_for(const ModelConfig& config, const Backend& backend) {
  return config.quantization.fp8_kv_cache ? DType::kF8E4M3 : backend.compute_dtype();
}

int64_t KvCache::bytes_per_block(const ModelConfig& config, int32_t block_size, DType dtype) {
  const int64_t per_slot =
      config.num_kv_heads * (config.head_dim * static_cast<int64_t>(dtype_size(dtype)) +
                             (dtype == DType::kF8E4M3 ? int64_t{sizeof(float)} : 0));
  return 2 * config.num_layers * block_size * per_slot;
}

const KvCacheLayer& KvCache::layer(int64_t layer) const {
  INFLIGHT_CHECK(layer >= 0 && layer < num_layers(), "kv cache: layer {} out of range [0, {})",
                 layer, num_layers());
  return layers_[static_cast<size_t>(layer)];
}

}  // namespace inflight
