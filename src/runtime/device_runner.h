// DeviceRunner: the ModelRunner of any Model on one Backend.
//
// The backend is chosen by the caller (backend/backend_factory.h) and the model by the
// architecture registry (model/registry.h), so this layer links neither. A step:
//   check the batch against the model and the cache (Model::check_step);
//   a decode-only step is padded to its bucket (runtime/decode_graphs.h), uploaded, and replayed
//   as a graph captured on the bucket's first use (GraphMode::kCapture), or run op by op;
//   any other step is uploaded and run as it is;
//   then the structured-output masks (filled by the engine while the forward runs, applied
//   outside any graph), the candidate selection over the logits (Backend::top_k_logits) and the
//   downloads of what the sampler asked for.
// Under tensor parallelism every rank runs a DeviceRunner over its shard (the ranks' steps meet
// in the model's collectives). A model whose LM head is split by vocabulary returns each rank's
// columns: every rank selects its own candidates, they are gathered, and rank 0 merges them
// (the k best of the ranks' k best, the log-sum-exp of their log-sum-exps); rows wanted whole
// are gathered whole. Only rank 0's results are meant for a sampler.
// On an asynchronous backend (CUDA) begin_step only enqueues and end_step waits for the
// device; on the CPU begin_step does all the work.
#pragma once

#include <memory>
#include <optional>

#include "runtime/backend.h"
#include "runtime/communicator.h"
#include "runtime/decode_graphs.h"
#include "runtime/kv_cache.h"
#include "runtime/model.h"
#include "runtime/model_runner.h"

namespace inflight {

struct RunnerOptions {
  // Decode steps as graphs (runtime/decode_graphs.h). kCapture falls back to kOff on backends
  // without graphs.
  GraphMode graph_mode = GraphMode::kCapture;
};

class DeviceRunner final : public ModelRunner {
 public:
  // `model` must live on `backend`. Several runners may share one backend (models served side
  // by side on one device; their steps then share its streams and GEMM plans). `tp` and `pp`:
  // the tensor-parallel group and the pipeline the model was built with (null: one rank, one
  // stage); on a stage before the last, steps return no logits (StepLogits of 0 rows).
  DeviceRunner(std::shared_ptr<Backend> backend, std::unique_ptr<Model> model,
               const RunnerOptions& options = {}, std::shared_ptr<Communicator> tp = nullptr,
               std::shared_ptr<Communicator> pp = nullptr);

  const ModelConfig& model_config() const override { return model_->config(); }
  std::string_view device_name() const override { return backend_->name(); }
  void reserve_workspace(int32_t max_num_batched_tokens, int32_t max_num_seqs) override;
  RunnerMemory memory() const override;
  int64_t kv_bytes_per_block(int32_t block_size) const override;
  void init_kv_cache(int64_t num_blocks, int32_t block_size) override;
  bool asynchronous() const override { return backend_->asynchronous(); }
  // Not on a pipeline stage before the last, nor with a vocabulary-split LM head.
  bool supports_token_masks() const override;
  void set_abandon_flag(const std::atomic<bool>* flag) override { abandon_ = flag; }
  void begin_step(const ForwardBatch& batch, const LogitsRequest& request) override;
  StepLogits& end_step() override;
  std::optional<StepDeviceTime> last_step_device_time() const override;

  Backend& backend() { return *backend_; }
  Model& model() { return *model_; }
  // This rank's tensor-parallel group (a SingleRankCommunicator on one rank).
  Communicator& communicator() { return *communicator_; }
  // The pipeline stages the model is split into (1: none). This runner computes one step at a
  // time whatever their number; the stages overlap across ranks (parallel/parallel_runner.h).
  int32_t num_stages() const { return pipeline_ != nullptr ? pipeline_->world_size() : 1; }
  const DecodeGraphs& graphs() const { return graphs_; }
  // Changes how decode steps run; drops the graphs recorded so far.
  void set_graph_mode(GraphMode mode);

  // Enqueues the forward pass of one step (graphs as configured) and returns the device f32
  // logits [batch.logits_indices.size(), vocab]: a workspace view, valid until the next step.
  Tensor enqueue(const ForwardBatch& batch, KvCache& cache);

 private:
  // The decode step of `batch` in its bucket: padded, uploaded, then replayed or run.
  Tensor enqueue_decode(const ForwardBatch& batch, KvCache& cache,
                        const DecodeGraphs::Bucket& bucket);
  // What reserve_workspace() makes room for: the token budget or the largest decode bucket,
  // whichever is more tokens, and the largest decode bucket's logits rows.
  struct Capacity {
    int32_t tokens;
    int32_t logits;
  };
  Capacity capacity() const;
  // Grows the model's workspace to hold a step; a move of the workspace drops the graphs.
  void reserve(int64_t tokens, int64_t logits);
  // Host tensor `t` with at least `shape`'s elements, viewed as `shape` (grown on demand).
  static Tensor host_view(Tensor& storage, const Shape& shape, DType dtype);
  // Device tensor likewise.
  Tensor device_view(Tensor& storage, const Shape& shape, DType dtype);
  // A vocabulary-split LM head: gathers the ranks' candidates and whole rows (rank 0 downloads
  // them); merge_shards() puts them together once the step is done.
  void gather_shards(const Tensor& logits, const LogitsRequest& request);
  void merge_shards();
  // Fills the masks of `request` (LogitsRequest::fill_masks) and enqueues their application.
  void apply_masks(const Tensor& logits, const LogitsRequest& request);

  // NOTE: declared first so that they are destroyed last: the model and the cache live on the
  // backend, and the model's collectives go through the communicator.
  std::shared_ptr<Backend> backend_;
  std::shared_ptr<Communicator> communicator_;
  std::shared_ptr<Communicator> pipeline_;  // null: one stage
  std::unique_ptr<Model> model_;
  std::optional<KvCache> cache_;
  DecodeGraphs graphs_{GraphMode::kOff, 1};
  ForwardBatch padded_;  // scratch: the padded decode batch
  const std::atomic<bool>* abandon_ = nullptr;
  int32_t max_num_batched_tokens_ = 0;
  int32_t max_num_seqs_ = 0;
  bool step_begun_ = false;

  // Device buffers of the candidate selection: [rows cap], [rows cap * kMaxLogitsTopK].
  Tensor lse_dev_, ids_dev_, vals_dev_;
  // Host storage the results land in (reused every step).
  Tensor lse_host_, ids_host_, vals_host_, full_host_;
  // Host storage of the structured-output masks: [masked rows] row ids, [masked rows, words].
  Tensor mask_rows_host_, mask_bits_host_;
  StepLogits result_;
  // Vocabulary shards: the gathered candidates ([ranks, rows, k_shard] ids and logits, [ranks,
  // rows] log-sum-exps) and whole rows ([ranks, rows, shard vocab]), on the device and on rank 0's
  // host until merge_shards().
  struct Shards {
    bool pending = false;
    int32_t k = 0;      // candidates per rank and row
    int64_t vocab = 0;  // columns per rank
    std::vector<int32_t> full_rows;
    Tensor lse_dev, ids_dev, vals_dev, full_dev;
    Tensor lse, ids, vals, full;  // host
    Tensor lse_storage, ids_storage, vals_storage, full_storage;
  };
  Shards shards_;
};

}  // namespace inflight
