// LlamaRunner: a ModelRunner over LlamaModel on any Backend.
//
// The backend is chosen by the caller (CPU in tools and tests, CUDA later), so this library
// never links a concrete backend.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "engine/model_runner.h"
#include "model/kv_cache.h"
#include "model/llama.h"
#include "model/model_files.h"

namespace inflight {

class LlamaRunner final : public ModelRunner {
 public:
  // Uploads the weights of `files` to `backend`.
  LlamaRunner(std::unique_ptr<Backend> backend, const ModelFiles& files);
  // Weights given directly (tests, dummy weights).
  LlamaRunner(std::unique_ptr<Backend> backend, const ModelConfig& config,
              const LlamaModel::WeightMap& weights);
  // Opens a .gguf file or a Hugging Face directory and loads it. Throws Error naming the file.
  static std::unique_ptr<LlamaRunner> load(std::unique_ptr<Backend> backend,
                                           const std::string& model_path);

  const ModelConfig& model_config() const override { return model_->config(); }
  std::string_view device_name() const override { return backend_->name(); }
  int64_t kv_bytes_per_block(int32_t block_size) const override;
  void init_kv_cache(int64_t num_blocks, int32_t block_size) override;
  void begin_step(const ForwardBatch& batch) override;
  Tensor end_step() override;

 private:
  // NOTE: declared first so that it is destroyed last: the model and the cache live on it.
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<LlamaModel> model_;
  std::optional<KvCache> cache_;
  Tensor logits_;  // of the step begun last
};

}  // namespace inflight
