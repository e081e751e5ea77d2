#include "engine/llama_runner.h"

#include <utility>

#include "core/check.h"

namespace inflight {

LlamaRunner::LlamaRunner(std::unique_ptr<Backend> backend, const ModelFiles& files)
    : backend_(std::move(backend)) {
  INFLIGHT_CHECK_CODE(backend_ != nullptr, ErrorCode::kInvalidArgument,
                      "LlamaRunner needs a "
                      "backend");
  model_ = std::make_unique<LlamaModel>(files, *backend_);
}

LlamaRunner::LlamaRunner(std::unique_ptr<Backend> backend, const ModelConfig& config,
                         const LlamaModel::WeightMap& weights)
    : backend_(std::move(backend)) {
  INFLIGHT_CHECK_CODE(backend_ != nullptr, ErrorCode::kInvalidArgument,
                      "LlamaRunner needs a "
                      "backend");
  model_ = std::make_unique<LlamaModel>(config, weights, *backend_);
}

std::unique_ptr<LlamaRunner> LlamaRunner::load(std::unique_ptr<Backend> backend,
                                               const std::string& model_path) {
  const std::unique_ptr<ModelFiles> files = ModelFiles::open(model_path);
  return std::make_unique<LlamaRunner>(std::move(backend), *files);
}

int64_t LlamaRunner::kv_bytes_per_block(int32_t block_size) const {
  return KvCache::bytes_per_block(model_->config(), block_size, backend_->compute_dtype());
}

void LlamaRunner::init_kv_cache(int64_t num_blocks, int32_t block_size) {
  INFLIGHT_CHECK(!cache_.has_value(), "the KV cache is already allocated");
  cache_.emplace(model_->make_kv_cache(num_blocks, block_size));
}

void LlamaRunner::begin_step(const ForwardBatch& batch) {
  INFLIGHT_CHECK(cache_.has_value(), "init_kv_cache must run before the first step");
  // LlamaModel::forward returns host logits, so the step completes here; an asynchronous
  // runner would only enqueue it.
  logits_ = model_->forward(batch, *cache_);
}

Tensor LlamaRunner::end_step() {
  INFLIGHT_CHECK(logits_.defined(), "end_step without begin_step");
  return std::exchange(logits_, Tensor());
}

}  // namespace inflight
