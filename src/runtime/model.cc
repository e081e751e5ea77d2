#include "runtime/model.h"

#include "core/check.h"

namespace inflight {

KvCache Model::make_kv_cache(int64_t num_blocks, int32_t block_size) const {
  return KvCache(backend_, shard_config(), num_blocks, block_size);
}

int64_t Model::kv_bytes_per_block(int32_t block_size) const {
  return KvCache::bytes_per_block(shard_config(), block_size,
                                  KvCache::dtype_for(config(), backend_));
}

void Model::check_step(const ForwardBatch& batch, const KvCache& cache) const {
  const ModelConfig& c = shard_config();
  INFLIGHT_CHECK_CODE(cache.num_layers() == c.num_layers &&
                          cache.num_kv_heads() == c.num_kv_heads && cache.head_dim() == c.head_dim,
                      ErrorCode::kInvalidArgument,
                      "kv cache shaped for {} layers x {} kv heads x {} head_dim, model needs {} "
                      "x {} x {}",
                      cache.num_layers(), cache.num_kv_heads(), cache.head_dim(), c.num_layers,
                      c.num_kv_heads, c.head_dim);
  const DType want = KvCache::dtype_for(c, backend_);
  INFLIGHT_CHECK_CODE(cache.dtype() == want && cache.device() == backend_.device(),
                      ErrorCode::kInvalidArgument,
                      "kv cache of dtype {} does not belong to this model on the {} backend "
                      "(expected {})",
                      dtype_name(cache.dtype()), backend_.name(), dtype_name(want));
  batch.validate(cache.block_size(), cache.num_blocks());
  for (const int32_t id : batch.token_ids) {
    INFLIGHT_CHECK_CODE(id < config().vocab_size, ErrorCode::kInvalidArgument,
                        "token id {} is outside the vocabulary of {} tokens", id,
                        config().vocab_size);
  }
}

Tensor Model::forward(const ForwardBatch& batch, KvCache& cache) {
  check_step(batch, cache);
  reserve(batch.num_tokens(), static_cast<int64_t>(batch.logits_indices.size()));
  const Tensor logits = run(backend_.upload_batch(batch), cache, nullptr);
  Tensor host = Tensor::empty(logits.shape(), DType::kF32);
  backend_.download_f32(logits, host);
  backend_.synchronize();
  return host;
}

}  // namespace inflight
