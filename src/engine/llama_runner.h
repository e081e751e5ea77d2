// LlamaRunner: a ModelRunner over LlamaModel on any Backend.
//
// The backend is chosen by the caller (backend/backend_factory.h), so this library never links
// a concrete backend. A step is asynchronous on an asynchronous backend (CUDA): begin_step
// enqueues the upload of the step's inputs, the forward pass (or the replay of its decode
// graph), the candidate selection over the logits (Backend::top_k_logits) and the downloads of
// what the sampler needs, and returns; end_step waits for the device and hands the results
// over. On the CPU backend begin_step does all the work.
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

struct RunnerOptions {
  // Decode steps as graphs (model/decode_graphs.h). kCapture falls back to kOff on backends
  // without graphs.
  GraphMode graph_mode = GraphMode::kCapture;
};

class LlamaRunner final : public ModelRunner {
 public:
  // Uploads the weights of `files` to `backend`.
  LlamaRunner(std::unique_ptr<Backend> backend, const ModelFiles& files,
              const RunnerOptions& options = {});
  // Weights given directly (tests).
  LlamaRunner(std::unique_ptr<Backend> backend, const ModelConfig& config,
              const LlamaModel::WeightMap& weights, const RunnerOptions& options = {});
  // Dummy weights of `config` made on the device from `seed` (LlamaModel's dummy constructor).
  LlamaRunner(std::unique_ptr<Backend> backend, const ModelConfig& config, uint64_t seed,
              const RunnerOptions& options = {});
  // Opens a .gguf file or a Hugging Face directory and loads it. Throws Error naming the file.
  static std::unique_ptr<LlamaRunner> load(std::unique_ptr<Backend> backend,
                                           const std::string& model_path,
                                           const RunnerOptions& options = {});

  const ModelConfig& model_config() const override { return model_->config(); }
  std::string_view device_name() const override { return backend_->name(); }
  void reserve_workspace(int32_t max_num_batched_tokens, int32_t max_num_seqs) override;
  RunnerMemory memory() const override;
  int64_t kv_bytes_per_block(int32_t block_size) const override;
  void init_kv_cache(int64_t num_blocks, int32_t block_size) override;
  bool asynchronous() const override { return backend_->device() != Device::kCpu; }
  void set_abandon_flag(const std::atomic<bool>* flag) override { model_->set_abandon_flag(flag); }
  void begin_step(const ForwardBatch& batch, const LogitsRequest& request) override;
  StepLogits& end_step() override;
  std::optional<StepDeviceTime> last_step_device_time() const override;

  Backend& backend() { return *backend_; }
  LlamaModel& model() { return *model_; }

 private:
  void configure(const RunnerOptions& options);
  // Host tensor `t` with at least `shape`'s elements, viewed as `shape` (grown on demand).
  static Tensor host_view(Tensor& storage, const Shape& shape, DType dtype);

  // NOTE: declared first so that it is destroyed last: the model and the cache live on it.
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<LlamaModel> model_;
  std::optional<KvCache> cache_;
  int32_t max_num_batched_tokens_ = 0;
  int32_t max_num_seqs_ = 0;
  bool step_begun_ = false;

  // Device buffers of the candidate selection: [rows cap], [rows cap * kMaxLogitsTopK].
  Tensor lse_dev_, ids_dev_, vals_dev_;
  // Host storage the results land in (reused every step).
  Tensor lse_host_, ids_host_, vals_host_, full_host_;
  StepLogits result_;
};

}  // namespace inflight
